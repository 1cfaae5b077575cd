-- Extensions and helper functions shared by every Alicia table.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS vector;

-- generate_random_id returns prefix || '_' || 20 random base62 characters
-- (about 119 bits of randomness), e.g. generate_random_id('am') = 'am_3kT9...'.
-- The random bytes come from gen_random_uuid() (core since PostgreSQL 13, no
-- pgcrypto): only the 14 fully random bytes of each version-4 UUID are used
-- (byte 6 carries the version nibble, byte 8 the variant bits), and bytes
-- >= 248 are rejected so that byte % 62 is uniform.
-- +goose StatementBegin
CREATE FUNCTION generate_random_id(prefix text) RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
    alphabet constant text := '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    id_len constant int := 20;
    raw bytea;
    b int;
    result text := '';
BEGIN
    IF prefix IS NULL OR prefix = '' THEN
        RAISE EXCEPTION 'generate_random_id: prefix must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WHILE length(result) < id_len LOOP
        raw := uuid_send(gen_random_uuid());
        FOR i IN 0..15 LOOP
            CONTINUE WHEN i = 6 OR i = 8;
            b := get_byte(raw, i);
            CONTINUE WHEN b >= 248;
            result := result || substr(alphabet, (b % 62) + 1, 1);
            EXIT WHEN length(result) = id_len;
        END LOOP;
    END LOOP;
    RETURN prefix || '_' || result;
END;
$$;
-- +goose StatementEnd

-- alicia_set_updated_at is attached as a BEFORE UPDATE trigger to every table
-- that has an updated_at column.
-- +goose StatementBegin
CREATE FUNCTION alicia_set_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION IF EXISTS alicia_set_updated_at();
DROP FUNCTION IF EXISTS generate_random_id(text);
DROP EXTENSION IF EXISTS vector;
