-- Issue 24, hole 5: a key means every seal is keyed. A ledger sealed plain
-- (sha256) starts being keyed only by an explicit act, `verity ledger
-- start-keying`, which writes this row under the key: it names the plain
-- records before it (their count and the last one's seal), and the keyed seal
-- over it (chained to that plain seal) anchors them. With VERITY_LEDGER_KEY set,
-- verify passes plain records only when a keyed row here names exactly them.
CREATE TABLE seal_keyings (
  id INTEGER PRIMARY KEY,
  plain_records INTEGER NOT NULL CHECK (plain_records >= 1),
  plain_tip TEXT NOT NULL,
  by TEXT NOT NULL,
  reason TEXT NOT NULL,
  keyed_at TEXT NOT NULL
);
CREATE TRIGGER seal_keyings_no_update BEFORE UPDATE ON seal_keyings BEGIN SELECT RAISE(ABORT, 'seal_keyings is append-only'); END;
CREATE TRIGGER seal_keyings_no_delete BEFORE DELETE ON seal_keyings BEGIN SELECT RAISE(ABORT, 'seal_keyings is append-only'); END;
