/*
 * watchdog.h — deadlines for the HTTP connections of `kvik serve`.
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte
 * restarts it, so a client that sends one header byte every few seconds
 * keeps its connection (and its slot under --max-connections) for ever.
 * The watchdog gives each request two deadlines of its own: the headers
 * must be complete within header_s of the connection opening (or of the
 * previous response on a kept-alive connection), the body within body_s
 * of the headers. One thread sleeps until the nearest deadline; a
 * connection past its deadline gets a fixed reply (408) written to its
 * socket and the socket shut down, which ends the connection in
 * libmicrohttpd's thread: first its sending side (the client reads the
 * reply and an end of file; what it still sends is read and dropped),
 * the rest a second later (a lingering close).
 *
 * A connection moves through these phases, each move made by the thread
 * that serves it (libmicrohttpd's callbacks):
 *
 *   HEADERS --watchdog_body--> BODY --watchdog_answer--> ANSWER
 *      ^                                                   |
 *      +------------------ watchdog_idle ------------------+
 *
 * and to CUT from HEADERS or BODY at its deadline (or by watchdog_cut).
 * The reply and the shutdown happen under the watchdog's lock and only in
 * HEADERS or BODY, when the server writes nothing to the socket (but for
 * libmicrohttpd's "100 Continue", written at the start of BODY, and its
 * own error replies to malformed requests, after which it closes); a
 * connection is CUT for good, so watchdog_body and watchdog_answer then
 * say false and the server answers nothing more. watchdog_close runs
 * before libmicrohttpd closes the socket, so the watchdog never touches
 * a descriptor number that has been reused.
 */
#ifndef KVIK_SERVER_WATCHDOG_H
#define KVIK_SERVER_WATCHDOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct watchdog;
struct watch_conn;

enum watch_cut {
    WATCH_CUT_IDLE,    /* kept alive and idle past the header deadline (no reply) */
    WATCH_CUT_HEADERS, /* past the header deadline */
    WATCH_CUT_BODY,    /* past the body deadline */
    WATCH_CUT_OTHER,   /* watchdog_cut */
    WATCH_CUT_COUNT,
};

/* Starts the watchdog thread. reply (copied) is written to a connection
 * cut at a deadline while a request is under way: a whole HTTP response
 * with "Connection: close". NULL if out of memory or no thread. */
struct watchdog *watchdog_new(double header_s, double body_s, const char *reply);

/* Stops the thread and frees everything; every connection must have been
 * closed (watchdog_close) first. NULL is allowed. */
void watchdog_free(struct watchdog *w);

/* A new connection on socket fd, in HEADERS with its header deadline
 * running. NULL if out of memory (that connection has no deadlines). */
struct watch_conn *watchdog_open(struct watchdog *w, int fd);

/* The connection is closing: forgotten (c is freed). c may be NULL. */
void watchdog_close(struct watchdog *w, struct watch_conn *c);

/* The request line arrived: a cut in HEADERS now gets the reply. Without
 * it, only a connection's first request gets one; an idle kept-alive
 * connection is closed silently (a reply there could be taken for the
 * answer to a request the client sends at that moment). */
void watchdog_request_line(struct watchdog *w, struct watch_conn *c);

/* The headers are complete: BODY, with the body deadline running. False
 * when the connection was cut (the handler then returns MHD_NO). */
bool watchdog_body(struct watchdog *w, struct watch_conn *c);

/* A response is about to be queued, or a handler starts work that may take
 * long (generation): ANSWER, no deadline. False when the connection was
 * cut. */
bool watchdog_answer(struct watchdog *w, struct watch_conn *c);

/* The response was sent: HEADERS again for the next request, with a fresh
 * header deadline (unless the connection was cut). */
void watchdog_idle(struct watchdog *w, struct watch_conn *c);

/* From the connection's own thread, in HEADERS or BODY: writes reply[0..len)
 * to the socket and shuts it down (CUT). False if it was cut already or
 * is in ANSWER (nothing written). */
bool watchdog_cut(struct watchdog *w, struct watch_conn *c, const char *reply, size_t len);

/* Connections open now (watchdog_open without watchdog_close). */
int64_t watchdog_open_count(const struct watchdog *w);

/* Connections cut so far for each reason. */
uint64_t watchdog_cuts(const struct watchdog *w, enum watch_cut why);

#endif /* KVIK_SERVER_WATCHDOG_H */
