-- 0010: as SQLite's 0034: mail (docs/email.md): who gets a site's email reports and traffic
-- alerts, the alerts' thresholds, the durable outbox, and the key that
-- signs unsubscribe links.

-- A recipient of one kind of a site's mail: weekly or monthly report, or
-- traffic alerts. Each row is one unsubscribe link's scope. email_key is
-- the address lowercased.
CREATE TABLE mail_subscriptions (
    id         text COLLATE "C" PRIMARY KEY,
    site_id    text COLLATE "C" NOT NULL,
    kind       text COLLATE "C" NOT NULL CHECK (kind IN ('weekly', 'monthly', 'alerts')),
    email      text COLLATE "C" NOT NULL,
    email_key  text COLLATE "C" NOT NULL,
    created_at text COLLATE "C" NOT NULL,
    UNIQUE (site_id, kind, email_key)
);

-- A site's traffic alert thresholds (NULL: that rule is off).
CREATE TABLE traffic_alerts (
    site_id        text COLLATE "C" PRIMARY KEY,
    spike_visitors bigint,
    drop_percent   bigint,
    updated_at     text COLLATE "C" NOT NULL
);

-- The outbox: one row per mail, enqueued once per (kind, site, recipient,
-- period). A row is pending until sent or given up (failed); an instance
-- claims it until lease_until, sends, then marks it. message is the whole
-- RFC 5322 message, emptied once sent.
CREATE TABLE mail_outbox (
    id              text COLLATE "C" PRIMARY KEY,
    kind            text COLLATE "C" NOT NULL,
    site_id         text COLLATE "C" NOT NULL,
    recipient_key   text COLLATE "C" NOT NULL,
    period          text COLLATE "C" NOT NULL,
    recipient       text COLLATE "C" NOT NULL,
    message         text COLLATE "C" NOT NULL,
    status          text COLLATE "C" NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts        bigint NOT NULL DEFAULT 0,
    next_attempt_at text COLLATE "C" NOT NULL,
    lease_owner     text COLLATE "C",
    lease_until     text COLLATE "C",
    last_error      text COLLATE "C",
    created_at      text COLLATE "C" NOT NULL,
    sent_at         text COLLATE "C",
    UNIQUE (kind, site_id, recipient_key, period)
);
CREATE INDEX mail_outbox_due ON mail_outbox(status, next_attempt_at);

-- The key of unsubscribe links' HMAC: one row, made by the first instance
-- that needs it, shared by every instance.
CREATE TABLE mail_keys (
    id  integer PRIMARY KEY CHECK (id = 1),
    key text COLLATE "C" NOT NULL
);
