-- Issue 9: seals can be keyed. With VERITY_LEDGER_KEY set, a new seal is
-- HMAC-SHA256(key, prev_seal|table|row_id|content_sha256) instead of plain
-- SHA-256, so nobody without the key can forge the chain; the key is never
-- stored. Each chain row records which algorithm sealed it. Existing rows keep
-- their seals and read 'sha256'. seal_chain is not itself a sealed table, so
-- the new column changes no row's canonical text.
ALTER TABLE seal_chain ADD COLUMN alg TEXT NOT NULL DEFAULT 'sha256' CHECK (alg IN ('sha256', 'hmac-sha256'));
