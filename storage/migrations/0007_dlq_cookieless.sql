-- 0007: a consent-denied event is quarantined in its cookieless form, with
-- no User-Agent but the browser, OS and device type events would hold, so a
-- replay stores it as it would have been stored, without hashing its
-- anon_id a second time. Older rows hold the event as sent (cookieless 0).
ALTER TABLE dlq ADD COLUMN cookieless INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq ADD COLUMN browser TEXT;
ALTER TABLE dlq ADD COLUMN os TEXT;
ALTER TABLE dlq ADD COLUMN device_type TEXT;
