/*
 * constrain.h — a request's grammar as the engine's constraint: one
 * matcher a choice over the served vocabulary.
 */
#ifndef KVIK_SERVER_CONSTRAIN_H
#define KVIK_SERVER_CONSTRAIN_H

#include "engine/engine.h"
#include "grammar/grammar.h"

struct constrain;

/* Compiled grammars by their text, shared by the requests that use them
 * (and so their mask caches): at most max unused ones are kept. The pool
 * has a worker thread that computes each choice's next mask while the
 * engine runs the forward pass (none when KVIK_GRAMMAR_AHEAD=0). */
struct grammar_pool;
struct grammar_pool *grammar_pool_new(int max);
void grammar_pool_free(struct grammar_pool *p); /* after every constrain_free */

/* What a pool text is: GBNF, a JSON Schema, or a forced tool call (the
 * line "hermes NAME" or "llama3 NAME" (NAME "*": any function), then the
 * tools array: grammar_from_tool_calls). */
enum { GRAMMAR_TEXT_GBNF, GRAMMAR_TEXT_SCHEMA, GRAMMAR_TEXT_TOOLS };

/* A constraint of n choices over the pool's grammar of (kind, text),
 * compiled on first use, and v (which must outlive it). NULL with err set
 * (the grammar's own errors: KVIK_ERR_FORMAT, KVIK_ERR_UNSUPPORTED). */
struct constrain *constrain_new(struct grammar_pool *p, int kind, const char *text, const struct grammar_vocab *v,
                                int n, struct kvik_err *err);
/* NULL is fine. */
void constrain_free(struct constrain *c);
/* The engine's view of it. */
const struct engine_constraint *constrain_engine(struct constrain *c);

/* Masks the engine asked for so far, how many of them the pool's worker
 * had computed ahead, and the engine's nanoseconds on them (waiting or
 * computing). */
void grammar_pool_stats(struct grammar_pool *p, uint64_t *masks, uint64_t *ahead, uint64_t *ns);

#endif
