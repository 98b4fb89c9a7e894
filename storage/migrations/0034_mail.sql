-- 0034: mail (docs/email.md): who gets a site's email reports and traffic
-- alerts, the alerts' thresholds, the durable outbox, and the key that
-- signs unsubscribe links.

-- A recipient of one kind of a site's mail: weekly or monthly report, or
-- traffic alerts. Each row is one unsubscribe link's scope. email_key is
-- the address lowercased.
CREATE TABLE mail_subscriptions (
    id         TEXT PRIMARY KEY,
    site_id    TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('weekly', 'monthly', 'alerts')),
    email      TEXT NOT NULL,
    email_key  TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (site_id, kind, email_key)
);

-- A site's traffic alert thresholds (NULL: that rule is off).
CREATE TABLE traffic_alerts (
    site_id        TEXT PRIMARY KEY,
    spike_visitors INTEGER,
    drop_percent   INTEGER,
    updated_at     TEXT NOT NULL
);

-- The outbox: one row per mail, enqueued once per (kind, site, recipient,
-- period). A row is pending until sent or given up (failed); an instance
-- claims it until lease_until, sends, then marks it. message is the whole
-- RFC 5322 message, emptied once sent.
CREATE TABLE mail_outbox (
    id              TEXT PRIMARY KEY,
    kind            TEXT NOT NULL,
    site_id         TEXT NOT NULL,
    recipient_key   TEXT NOT NULL,
    period          TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    message         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    lease_owner     TEXT,
    lease_until     TEXT,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    sent_at         TEXT,
    UNIQUE (kind, site_id, recipient_key, period)
);
CREATE INDEX mail_outbox_due ON mail_outbox(status, next_attempt_at);

-- The key of unsubscribe links' HMAC: one row, made by the first instance
-- that needs it, shared by every instance.
CREATE TABLE mail_keys (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    key TEXT NOT NULL
);
