-- Generated from localpg.RolesSQL by deploycmd.PostgresInitSQL: do not edit.
-- go test ./services/cli/deploycmd -run TestPostgresInitSQL -update
-- rewrites it.
--
-- The postgres image runs it once, as the superuser, when the postgres-data
-- volume is created: the database's roles (deploy/README.md, Boundaries)
-- with the passwords init-secrets wrote, and the vector extension (not
-- trusted: the superuser's job). On an existing volume the migrate job
-- makes the roles (alicia migrate up with the superuser's URL and the
-- roles' URLs).
\set alicia_migrator_password `cat "$POSTGRES_MIGRATOR_PASSWORD_FILE"`
\set alicia_writer_password `cat "$POSTGRES_WRITER_PASSWORD_FILE"`
\set alicia_reader_password `cat "$POSTGRES_READER_PASSWORD_FILE"`
DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alicia_migrator') THEN CREATE ROLE "alicia_migrator"; END IF; END $$;
ALTER ROLE "alicia_migrator" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'alicia_migrator_password';
DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alicia_writer') THEN CREATE ROLE "alicia_writer"; END IF; END $$;
ALTER ROLE "alicia_writer" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'alicia_writer_password';
DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alicia_reader') THEN CREATE ROLE "alicia_reader"; END IF; END $$;
ALTER ROLE "alicia_reader" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'alicia_reader_password';
CREATE EXTENSION IF NOT EXISTS vector;
ALTER SCHEMA public OWNER TO "alicia_migrator";
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
DO $$ DECLARE o record; BEGIN
  FOR o IN SELECT format('%s %s', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END, c.oid::regclass) AS obj
    FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
      AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
    UNION ALL SELECT format('TYPE %s', t.oid::regtype) FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd')
      AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e')
    UNION ALL SELECT format('FUNCTION %s', p.oid::regprocedure) FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
      AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
  LOOP EXECUTE format('ALTER %s OWNER TO %I', o.obj, 'alicia_migrator'); END LOOP;
END $$;
GRANT USAGE ON SCHEMA public TO "alicia_writer", "alicia_reader";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "alicia_writer";
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO "alicia_writer";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO "alicia_reader";
ALTER DEFAULT PRIVILEGES FOR ROLE "alicia_migrator" IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "alicia_writer";
ALTER DEFAULT PRIVILEGES FOR ROLE "alicia_migrator" IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "alicia_writer";
ALTER DEFAULT PRIVILEGES FOR ROLE "alicia_migrator" IN SCHEMA public GRANT SELECT ON TABLES TO "alicia_reader";
