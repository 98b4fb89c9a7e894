-- 0003: the User-Agent an event arrived with, so a DLQ replay re-sends it
-- and the replayed event gets the same bot check and browser/OS/device.
ALTER TABLE dlq ADD COLUMN user_agent TEXT;
