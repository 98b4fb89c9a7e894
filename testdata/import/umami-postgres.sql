-- Umami's tables as its PostgreSQL schema has them (umami-software/umami,
-- prisma/migrations/01_init/migration.sql; event_data's columns as renamed
-- by 02_report_schema_session_data, visit_id of 05_add_visit_id,
-- distinct_id of 10_add_distinct_id; only the tables `tally import` reads),
-- holding the events of testdata/import/umami.csv, the custom event with
-- its event_data, and an event of another website, which is not read.
CREATE TABLE "session" ("session_id" UUID PRIMARY KEY, "website_id" UUID NOT NULL, "hostname" VARCHAR(100), "browser" VARCHAR(20),
	"os" VARCHAR(20), "device" VARCHAR(20), "screen" VARCHAR(11), "language" VARCHAR(35), "country" CHAR(2), "city" VARCHAR(50),
	"distinct_id" VARCHAR(50), "created_at" TIMESTAMPTZ(6) DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE "website_event" ("event_id" UUID PRIMARY KEY, "website_id" UUID NOT NULL, "session_id" UUID NOT NULL,
	"visit_id" UUID NOT NULL, "created_at" TIMESTAMPTZ(6) DEFAULT CURRENT_TIMESTAMP, "url_path" VARCHAR(500) NOT NULL,
	"url_query" VARCHAR(500), "referrer_path" VARCHAR(500), "referrer_query" VARCHAR(500), "referrer_domain" VARCHAR(500),
	"page_title" VARCHAR(500), "event_type" INTEGER NOT NULL DEFAULT 1, "event_name" VARCHAR(50), "hostname" VARCHAR(100));
CREATE TABLE "event_data" ("event_data_id" UUID PRIMARY KEY, "website_id" UUID NOT NULL, "website_event_id" UUID NOT NULL,
	"data_key" VARCHAR(500) NOT NULL, "string_value" VARCHAR(500), "number_value" DECIMAL(19,4), "date_value" TIMESTAMPTZ(6),
	"data_type" INTEGER NOT NULL, "created_at" TIMESTAMPTZ(6) DEFAULT CURRENT_TIMESTAMP);

INSERT INTO session (session_id, website_id, browser, os, device, country, city) VALUES
	('a1f0c1de-0001-4c1a-8000-000000000001', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'chrome', 'Mac OS', 'laptop', 'DE', 'Berlin'),
	('a1f0c1de-0002-4c1a-8000-000000000002', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'ios', 'iOS', 'mobile', 'US', NULL),
	('a1f0c1de-0003-4c1a-8000-000000000003', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'firefox', 'Linux', 'desktop', 'FR', NULL);

INSERT INTO website_event (event_id, website_id, session_id, visit_id, created_at, url_path, referrer_path, referrer_query, referrer_domain, event_type, event_name, hostname) VALUES
	('e0000001-0000-4000-8000-000000000001', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0001-4c1a-8000-000000000001', 'b0000000-0000-4000-8000-000000000001', '2024-03-15 10:00:00+00', '/pricing', '/item', 'id=1', 'news.ycombinator.com', 1, NULL, 'example.com'),
	('e0000001-0000-4000-8000-000000000002', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0001-4c1a-8000-000000000001', 'b0000000-0000-4000-8000-000000000001', '2024-03-15 10:02:00+00', '/docs', NULL, NULL, NULL, 1, NULL, 'example.com'),
	('e0000001-0000-4000-8000-000000000003', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0001-4c1a-8000-000000000001', 'b0000000-0000-4000-8000-000000000001', '2024-03-15 10:03:00+00', '/docs', NULL, NULL, NULL, 2, 'signup', 'example.com'),
	('e0000001-0000-4000-8000-000000000004', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0002-4c1a-8000-000000000002', 'b0000000-0000-4000-8000-000000000002', '2024-03-15 11:00:00+00', '/', NULL, NULL, 'www.google.com', 1, NULL, 'example.com'),
	('e0000001-0000-4000-8000-000000000005', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0002-4c1a-8000-000000000002', 'b0000000-0000-4000-8000-000000000002', '2024-03-15 11:01:00+00', '/pricing', NULL, NULL, NULL, 1, NULL, 'example.com'),
	('e0000001-0000-4000-8000-000000000006', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0002-4c1a-8000-000000000002', 'b0000000-0000-4000-8000-000000000002', '2024-03-15 11:02:00+00', '/go', NULL, NULL, NULL, 3, NULL, 'example.com'),
	('e0000001-0000-4000-8000-000000000007', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'a1f0c1de-0003-4c1a-8000-000000000003', 'b0000000-0000-4000-8000-000000000003', '2024-03-16 09:00:00+00', '/', NULL, NULL, NULL, 1, NULL, 'example.com'),
	('e0000001-0000-4000-8000-000000000099', '00000000-0000-4000-8000-0000000000ff', 'a1f0c1de-0009-4c1a-8000-000000000009', 'b0000000-0000-4000-8000-000000000009', '2024-03-15 10:00:00+00', '/other', NULL, NULL, NULL, 1, NULL, 'other.example');

INSERT INTO event_data (event_data_id, website_id, website_event_id, data_key, string_value, number_value, data_type) VALUES
	('d0000000-0000-4000-8000-000000000001', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'e0000001-0000-4000-8000-000000000003', 'plan', 'pro', NULL, 1),
	('d0000000-0000-4000-8000-000000000002', '4fb7c6e2-6a1b-4b8e-9a53-6f2f0f5ad0c1', 'e0000001-0000-4000-8000-000000000003', 'amount', '49.5', 49.5, 2);
