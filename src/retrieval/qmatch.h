/*
 * qmatch.h — whether two questions say the same thing in the same words:
 * the semantic cache's guard against near misses that embeddings rate as
 * close (a negation, swapped entities, another number, an added
 * constraint), which no cosine threshold tells from a paraphrase.
 *
 * Each question becomes its sequence of content words:
 *  - ASCII letters lowercased; "n't" read as " not"; the endings 's 're 've
 *    'll 'd 'm dropped; ’ read as ';
 *  - words are runs of letters (bytes >= 0x80 count as letters), numbers
 *    (digits with inner '.' or ',', the commas dropped), and the symbols
 *    $ € £ % + # one each; the number words zero .. twenty read as digits;
 *  - the function words of QMATCH_STOP_WORDS are dropped (articles,
 *    pronouns, forms of be and do, of/in/on/at/about/as/by, can/could/
 *    would/will, please, and request verbs such as tell, give, explain);
 *    wh-words, negations, modal verbs of obligation and the directional
 *    prepositions (to, from, into, than, with, without, ...) stay.
 * Two questions match when their sequences have the same length and each
 * pair of words is equal, or one is the other plus "s" or "es", or both
 * have 5 bytes or more, the same first byte and an optimal string
 * alignment distance of 1 (a typo) — never for numbers or negations.
 */
#ifndef KVIK_RETRIEVAL_QMATCH_H
#define KVIK_RETRIEVAL_QMATCH_H

#include <stdbool.h>
#include <stddef.h>

bool qmatch_same(const char *a, size_t alen, const char *b, size_t blen);

#endif /* KVIK_RETRIEVAL_QMATCH_H */
