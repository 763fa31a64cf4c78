"""Built-in plugin: the ``postgres`` session store (psycopg 3, the ``postgres`` extra)."""

from ..hookspecs import hookimpl
from ..sessions.jsonl_store import SessionLogError


@hookimpl
def dsh_register_session_stores(register, config):
    def factory(home):
        # Imported on first use: psycopg is optional and costs nothing unless configured.
        from ..sessions.postgres_store import PostgresSessionStore
        from ..storage.postgres import DRIVER_MISSING, driver_missing

        if driver_missing():
            # Refused when the store is made, not at its first query: a copy to it with
            # nothing to copy would otherwise report success.
            raise SessionLogError(f'sessions.store: "postgres" {DRIVER_MISSING}')

        dsn = config.sessions.dsn or config.storage.dsn
        if dsn is None:
            raise SessionLogError('sessions.dsn: the postgres session store needs a database '
                                  'URL: set sessions.dsn or storage.dsn, e.g. '
                                  'dsn = "${DSH_DATABASE_URL}"')
        # The storage's leases are in this database when both use the same one.
        here = (config.storage.backend == "postgres" and config.storage.dsn is not None
                and dsn.get_secret_value() == config.storage.dsn.get_secret_value())
        return PostgresSessionStore(dsn.get_secret_value(), leases_here=here)

    register("postgres", factory)
