-- Persistence replicas. Several persistence instances share the work of a
-- stream by partition: a stream's offsets rows (one per partition, named
-- consumer/k, or consumer when there is one) are its partitions, and each is
-- leased to one instance at a time.
--
-- owner is the instance holding the lease, until lease_expires_at; it renews
-- the lease while it lives, and another instance may take the partition once
-- it has expired (or has no owner). fence grows by one with every take and
-- every release: an instance applies a batch of a partition only in a
-- transaction that finds the partition still owned by it under the fence it
-- took it with, checked after the offset row is locked by the batch's own
-- offset update. An instance that lost its lease (stopped, paused past the
-- lease, cut off from the database) can therefore never write a row of a
-- partition another instance has taken: its transaction fails and is rolled
-- back, and the new owner resumes after the offset stored with the rows.
--
-- alicia_persistence_instances are the instances alive: each refreshes
-- seen_at while it runs, and the partitions are spread evenly over the
-- instances seen within a lease. partitions is how many conversation
-- partitions an instance was configured with: instances configured
-- differently split conversations differently, so one started later than
-- an instance alive with another count takes nothing until that one is gone
-- (a rolling update that changes the count hands over instead of mixing).

-- +goose Up
ALTER TABLE alicia_stream_offsets
    ADD COLUMN owner text,
    ADD COLUMN fence bigint NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at timestamptz,
    ADD CONSTRAINT alicia_stream_offsets_fence_check CHECK (fence >= 0);

CREATE TABLE alicia_persistence_instances (
    id          text NOT NULL,
    consumer    text NOT NULL,
    partitions  integer NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT alicia_persistence_instances_pkey PRIMARY KEY (id)
);

-- +goose Down
DROP TABLE IF EXISTS alicia_persistence_instances;
ALTER TABLE alicia_stream_offsets
    DROP CONSTRAINT alicia_stream_offsets_fence_check,
    DROP COLUMN lease_expires_at,
    DROP COLUMN fence,
    DROP COLUMN owner;
