-- Runs once, as the superuser, when the postgres volume is created.
-- pgvector 0.8 is not a trusted extension: create it here so the migrating
-- role does not need to be a superuser.
CREATE EXTENSION IF NOT EXISTS vector;
