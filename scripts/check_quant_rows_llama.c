/*
 * check_quant_rows_llama.c — compares tensor_quantize_rows with what the
 * llama-quantize program wrote, tensor by tensor.
 *
 *   check_quant_rows_llama --make-imatrix SRC.gguf OUT.dat
 *       writes an importance matrix in llama.cpp's legacy .dat format for
 *       every 2-D weight of SRC: ne0 deterministic weights (splitmix64, as
 *       tests/quant_rows_cases.h; every 11th zero), ncall 1.
 *   check_quant_rows_llama SRC.gguf QUANT.gguf [IMATRIX.dat]
 *       for every tensor QUANT stores in a type tensor_quantize_rows makes
 *       from SRC's F32 tensor of the same name, quantizes SRC's rows (with
 *       the tensor's importance weights when given) and compares the bytes.
 *       Prints each differing tensor (blocks that differ, largest
 *       difference of the dequantized values) and a summary; exits 1 if any
 *       tensor differs.
 *
 * scripts/check_quant_rows_llama.sh drives it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant_rows_cases.h"
#include "tensor/quantize.h"
#include "tensor/tensor.h"

static int make_imatrix(const char *src_path, const char *out_path) {
    struct gguf *g;
    struct kvik_err err;
    if (gguf_open(src_path, &g, &err) != KVIK_OK) {
        fprintf(stderr, "cannot open %s\n", src_path);
        return 1;
    }
    FILE *f = fopen(out_path, "wb");
    if (!f) return 1;
    int32_t n = 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) n += gguf_tensor(g, i)->n_dims == 2;
    fwrite(&n, 4, 1, f);
    uint64_t s = 0x51DE;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        if (t->n_dims != 2) continue;
        const int32_t len = (int32_t)strlen(t->name), ncall = 1, nval = (int32_t)t->ne[0];
        fwrite(&len, 4, 1, f);
        fwrite(t->name, 1, (size_t)len, f);
        fwrite(&ncall, 4, 1, f);
        fwrite(&nval, 4, 1, f);
        for (int32_t k = 0; k < nval; k++) {
            const float a = 0.05f + qr_uniform(&s);
            const float v = k % 11 == 4 ? 0.0f : a * a * 10.0f;
            fwrite(&v, 4, 1, f);
        }
    }
    const int32_t chunks = 1, dlen = 0;
    fwrite(&chunks, 4, 1, f);
    fwrite(&dlen, 4, 1, f);
    fclose(f);
    gguf_close(g);
    return 0;
}

/* The weights of tensor `name` in a legacy .dat file (malloc'd), or NULL. */
static float *read_imatrix(const char *path, const char *name, int64_t ne0) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int32_t n;
    float *found = NULL;
    if (fread(&n, 4, 1, f) != 1) n = 0;
    for (int32_t e = 0; e < n && !found; e++) {
        int32_t len, ncall, nval;
        char buf[512];
        if (fread(&len, 4, 1, f) != 1 || len <= 0 || len >= (int32_t)sizeof buf) break;
        if (fread(buf, 1, (size_t)len, f) != (size_t)len) break;
        buf[len] = 0;
        if (fread(&ncall, 4, 1, f) != 1 || fread(&nval, 4, 1, f) != 1 || nval < 1) break;
        float *v = malloc((size_t)nval * 4);
        if (fread(v, 4, (size_t)nval, f) != (size_t)nval) {
            free(v);
            break;
        }
        if (strcmp(buf, name) == 0 && nval == ne0) {
            for (int32_t k = 0; k < nval; k++) v[k] = ncall > 0 ? v[k] / (float)ncall : v[k];
            found = v;
        } else {
            free(v);
        }
    }
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--make-imatrix") == 0) return make_imatrix(argv[2], argv[3]);
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s SRC.gguf QUANT.gguf [IMATRIX.dat] | --make-imatrix SRC.gguf OUT.dat\n", argv[0]);
        return 2;
    }
    struct gguf *src, *q;
    struct kvik_err err;
    if (gguf_open(argv[1], &src, &err) != KVIK_OK || gguf_open(argv[2], &q, &err) != KVIK_OK) {
        fprintf(stderr, "cannot open the files\n");
        return 2;
    }
    int compared = 0, differ = 0, skipped = 0, weighted = 0;
    int64_t bad_blocks = 0, blocks = 0;
    for (int64_t i = 0; i < gguf_n_tensors(q); i++) {
        const struct gguf_tensor *tq = gguf_tensor(q, i);
        const int64_t si = gguf_find_tensor(src, tq->name);
        const struct gguf_tensor *ts = si >= 0 ? gguf_tensor(src, si) : NULL;
        if (!ts || ts->type != TENSOR_TYPE_F32 || tq->type == TENSOR_TYPE_F32 || !tensor_quantize_supported(tq->type) ||
            ts->n_elems != tq->n_elems) {
            skipped++;
            continue;
        }
        const int64_t ne0 = tq->ne[0], rows = tq->n_elems / ne0;
        const size_t bytes = tensor_row_size(tq->type, ne0) * (size_t)rows;
        float *x = malloc((size_t)tq->n_elems * 4);
        memcpy(x, ts->data, (size_t)tq->n_elems * 4);
        float *w = argc == 4 && tensor_quantize_uses_imatrix(tq->type) ? read_imatrix(argv[3], tq->name, ne0) : NULL;
        weighted += w != NULL;
        uint8_t *mine = malloc(bytes), *theirs = malloc(bytes);
        memcpy(theirs, tq->data, bytes);
        if (tensor_quantize_rows(tq->type, x, mine, rows, ne0, w) != bytes) {
            fprintf(stderr, "%s: tensor_quantize_rows refused %s\n", tq->name, tensor_type_name(tq->type));
            return 1;
        }
        compared++;
        const struct type_traits *tt = tensor_type_traits(tq->type);
        const int64_t nb = tq->n_elems / tt->block_size;
        blocks += nb;
        if (memcmp(mine, theirs, bytes) != 0) {
            int64_t nbad = 0;
            double maxdiff = 0;
            float *a = malloc((size_t)tt->block_size * 4), *b = malloc((size_t)tt->block_size * 4);
            for (int64_t k = 0; k < nb; k++) {
                const uint8_t *pa = mine + (size_t)k * tt->type_size, *pb = theirs + (size_t)k * tt->type_size;
                if (memcmp(pa, pb, tt->type_size) == 0) continue;
                nbad++;
                tt->to_float(pa, a, tt->block_size);
                tt->to_float(pb, b, tt->block_size);
                for (int64_t j = 0; j < tt->block_size; j++) {
                    const double d = a[j] > b[j] ? (double)a[j] - b[j] : (double)b[j] - a[j];
                    if (d > maxdiff) maxdiff = d;
                }
            }
            free(a);
            free(b);
            printf("DIFF %s %s%s: %lld of %lld blocks, max |deq difference| %g\n", tq->name, tt->name,
                   w ? " (imatrix)" : "", (long long)nbad, (long long)nb, maxdiff);
            bad_blocks += nbad;
            differ++;
        }
        free(x);
        free(w);
        free(mine);
        free(theirs);
    }
    printf("%d tensors compared (%d with importance weights), %d differ, %lld of %lld blocks differ; "
           "%d not compared\n", compared, weighted, differ, (long long)bad_blocks, (long long)blocks,
           skipped);
    gguf_close(src);
    gguf_close(q);
    return differ ? 1 : 0;
}
