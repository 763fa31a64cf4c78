"""Built-in plugin: the ``postgres`` storage backend (psycopg 3, the ``postgres`` extra)."""

from ..errors import StorageError
from ..hookspecs import hookimpl


@hookimpl
def dsh_register_storage_backends(register, config):
    def factory(directory):
        # Imported on first use: psycopg is optional and costs nothing unless configured.
        from ..storage.postgres import DRIVER_MISSING, driver_missing
        from ..storage.postgres_backend import PostgresBackend

        if driver_missing():
            raise StorageError(f"storage: the postgres backend {DRIVER_MISSING}")
        if config.storage.dsn is None:
            raise StorageError('storage.dsn: the postgres backend needs a database URL, e.g. '
                               'dsn = "${DSH_DATABASE_URL}" under [storage]')
        return PostgresBackend(config.storage.dsn.get_secret_value())

    register("postgres", factory)


@hookimpl
def dsh_validate(harness):
    """``storage.backend`` or a route naming postgres without its driver installed: ``dsh
    config check`` fails, saying what to install (``dsh run`` would fail at its first query
    otherwise). ``sessions.store``: its factory says so when the check opens the store."""
    cfg = harness.config
    where = [f for f, used in (
        ("storage.backend", cfg.storage.backend == "postgres"),
        ("storage.routes", "postgres" in cfg.storage.routes.values())) if used]
    if not where:
        return None
    from ..storage.postgres import DRIVER_MISSING, driver_missing

    if not driver_missing():
        return None
    return [f'{field}: "postgres" {DRIVER_MISSING}' for field in where]
