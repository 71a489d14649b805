#!/usr/bin/python3
"""Trains a small SentencePiece BPE model and writes what its own Python
encoder says about the conformance corpus (the reference verity's
SentencePiece tokenizer is compared with).

usage: /usr/bin/python3 spm_reference.py TRAIN.txt CORPUS.jsonl OUT_DIR
writes OUT_DIR/spm.model and OUT_DIR/spm_expected.jsonl, one line per input:
{"ids": encode(text), "special": [bos] + ids, "decoded": decode(ids)}
"""
import json
import os
import sys

import sentencepiece as spm


def main():
    train, corpus, out = sys.argv[1:4]
    prefix = os.path.join(out, "spm")
    # Deterministic: one thread, every sentence, no shuffling.
    spm.SentencePieceTrainer.train(
        input=train, model_prefix=prefix, model_type="bpe", vocab_size=400,
        byte_fallback=True, character_coverage=1.0, num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    tokens = 0
    lines = [l for l in open(corpus, encoding="utf-8").read().split("\n") if l]
    with open(os.path.join(out, "spm_expected.jsonl"), "w", encoding="utf-8") as f:
        for line in lines:
            text = json.loads(line)
            ids = sp.encode(text)
            tokens += len(ids)
            f.write(json.dumps({"ids": ids, "special": [sp.bos_id()] + ids,
                                "decoded": sp.decode(ids)}) + "\n")
    print(f"sentencepiece expected: {len(lines)} inputs, {tokens} tokens, "
          f"vocab {sp.get_piece_size()}, model {prefix}.model")


if __name__ == "__main__":
    main()
