/*
 * fake_openai.h — a fake OpenAI-compatible server on libmicrohttpd, for the
 * load generator's tests and for benchmarking the generator itself
 * (bench/fake-openai.c). It listens on 127.0.0.1 and answers:
 *
 *   POST /v1/chat/completions, /v1/completions   streamed (or not) completions
 *   GET  /v1/models                               one model, "fake-model"
 *   GET  /metrics                                 kvik_* metrics that count requests
 *
 * A whole reply has one choice whose text (or message content) is the
 * max_tokens words " w0 w1 ...", and no logprobs; a streamed reply has
 * max_tokens content events (" w0", " w1", ...), a
 * finish event, a usage event when stream_options.include_usage is set, and
 * data: [DONE]. Directives in the prompt text change one request:
 *
 *   #status=N     answer HTTP N with an OpenAI error object
 *   #first=MS     wait MS before the first token
 *   #delay=MS     wait MS before each further token
 *   #drop=K       after K tokens, close the connection mid-stream
 *   #bad=K        after K tokens, send an event that is not JSON
 *   #error=K      after K tokens, send an error object in the stream
 *   #nodone       end the stream cleanly without data: [DONE]
 *   #nousage      leave the usage event out even when asked
 *   #keepalive    a ": keep-alive" comment before every event
 *   #crlf         "\r\n" line ends
 *   #split        hand the stream to the socket a few bytes at a time
 *   #preempt      count one preemption in /metrics
 *
 * Usage prompt_tokens is the prompt's count of space-separated words.
 */
#ifndef KVIK_TESTS_FAKE_OPENAI_H
#define KVIK_TESTS_FAKE_OPENAI_H

#include <stdint.h>

struct fake_openai;

/* Starts listening on 127.0.0.1:port (0: any free port); NULL on failure.
 * delay_us_default: wait before each token when the prompt says nothing. */
struct fake_openai *fake_openai_start(uint16_t port, int delay_us_default);
uint16_t fake_openai_port(const struct fake_openai *f);
void fake_openai_stop(struct fake_openai *f);

/* Completion requests received, and a copy of the last request body
 * (malloc'd; NULL if none). */
int64_t fake_openai_requests(struct fake_openai *f);
char *fake_openai_last_body(struct fake_openai *f);

#endif /* KVIK_TESTS_FAKE_OPENAI_H */
