/*
 * convert.h — Hugging Face model directories to GGUF.
 *
 * A directory holds config.json, tokenizer.json, optionally
 * tokenizer_config.json and, for encoders, sentence-transformers'
 * modules.json and 1_Pooling/config.json, and the weights: model.safetensors,
 * or shards named by model.safetensors.index.json. Families:
 *  - "bert" (BertModel and its task heads, whose heads are dropped): a
 *    WordPiece encoder, written as llama.cpp's "bert" architecture with
 *    bert.pooling_type from the sentence-transformers pooling (mean 1,
 *    CLS 2; none: mean);
 *  - "llama" and "qwen2" decoders with a byte-level BPE tokenizer.json.
 * Tensor names and metadata keys are llama.cpp's, so its tools load the
 * result; llama's Q and K rows are permuted from Hugging Face's rotate-half
 * order to GGUF's interleaved pairs as llama.cpp's converter does.
 * Vectors (norms, biases) and BERT's token-type table are always F32;
 * matrices are F32, F16 or BF16 as asked, and any other type is made by the
 * quantizer (tools/quantize.h) from an F32 file written first. Weights may
 * be F32, F16 or BF16.
 */
#ifndef KVIK_CONVERT_CONVERT_H
#define KVIK_CONVERT_CONVERT_H

#include <stdbool.h>

#include "base/base.h"

struct convert_params {
    const char *dir;      /* the model directory */
    const char *out_path; /* written to out_path + ".tmp", renamed at the end */
    int ftype;            /* enum quant_ftype of the output (default F16) */
    int n_threads;        /* for the quantizer; 0: all CPUs */
    const char *name;     /* general.name; NULL: the directory's last component */
    const char *pre;      /* decoders: tokenizer.ggml.pre; NULL: told from tokenizer.json */
    bool progress;        /* a line per tensor on stderr */
};

void convert_params_default(struct convert_params *p);

/*
 * Converts p->dir into p->out_path. Errors: KVIK_ERR_IO for files that
 * cannot be read or written; KVIK_ERR_FORMAT for a malformed or
 * inconsistent file (naming it and the key or tensor at fault: a missing
 * tensor, a shape that disagrees with config.json, a vocabulary with holes);
 * KVIK_ERR_UNSUPPORTED for a family, weight type, rope scaling or tokenizer
 * this converter does not handle. A failure leaves no file at out_path.
 */
kvik_status convert_hf(const struct convert_params *p, struct kvik_err *err);

#endif /* KVIK_CONVERT_CONVERT_H */
