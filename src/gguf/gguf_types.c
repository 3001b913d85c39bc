/*
 * gguf_types.c — the metadata value types of GGUF (enum gguf_type): the
 * name of each and the bytes of one value of the fixed-size ones. Shared
 * by the reader, the accessors and the writer.
 */

#include "gguf/gguf.h"

static const struct {
    const char *name;
    size_t size;
} g_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"uint8", 1},     [GGUF_TYPE_INT8] = {"int8", 1},
    [GGUF_TYPE_UINT16] = {"uint16", 2},   [GGUF_TYPE_INT16] = {"int16", 2},
    [GGUF_TYPE_UINT32] = {"uint32", 4},   [GGUF_TYPE_INT32] = {"int32", 4},
    [GGUF_TYPE_FLOAT32] = {"float32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},
    [GGUF_TYPE_STRING] = {"string", 0},   [GGUF_TYPE_ARRAY] = {"array", 0},
    [GGUF_TYPE_UINT64] = {"uint64", 8},   [GGUF_TYPE_INT64] = {"int64", 8},
    [GGUF_TYPE_FLOAT64] = {"float64", 8},
};

const char *gguf_type_name(int type) {
    return type >= 0 && type < GGUF_TYPE_COUNT ? g_types[type].name : "?";
}

size_t gguf_type_size(int type) {
    return type >= 0 && type < GGUF_TYPE_COUNT ? g_types[type].size : 0;
}
