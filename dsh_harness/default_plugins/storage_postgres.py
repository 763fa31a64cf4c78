"""Built-in plugin: the ``postgres`` storage backend (psycopg 3, the ``postgres`` extra)."""

from ..errors import StorageError
from ..hookspecs import hookimpl


@hookimpl
def dsh_register_storage_backends(register, config):
    def factory(directory):
        # Imported on first use: psycopg is optional and costs nothing unless configured.
        from ..storage.postgres_backend import PostgresBackend

        if config.storage.dsn is None:
            raise StorageError('storage.dsn: the postgres backend needs a database URL, e.g. '
                               'dsn = "${DSH_DATABASE_URL}" under [storage]')
        return PostgresBackend(config.storage.dsn.get_secret_value())

    register("postgres", factory)
