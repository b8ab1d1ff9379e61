"""In-memory stores: the same Protocols as ``server/storage``'s PostgreSQL stores, kept in
Python (one module per aggregate, over one :class:`~tests.fakes.database.MemoryDatabase`), so
that the services' tests run on either."""
