/*
 * fake-openai.c — the tests' fake OpenAI-compatible server as a program
 * (make fake-openai), for benchmarking `kvik bench serve` itself: it streams
 * max_tokens tokens per request, as fast as it can or with --delay-us
 * microseconds before each, and understands the directives listed in
 * tests/fake_openai.h. Runs until SIGINT or SIGTERM.
 *
 *   build/kvik-fake-openai [--port N] [--delay-us N]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_openai.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

int main(int argc, char **argv) {
    long port = 0, delay_us = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            port = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--delay-us") && i + 1 < argc) {
            delay_us = strtol(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: kvik-fake-openai [--port N] [--delay-us N]\n");
            return 2;
        }
    }
    if (port < 0 || port > 65535 || delay_us < 0 || delay_us > 10000000) {
        fprintf(stderr, "kvik-fake-openai: bad --port or --delay-us\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct fake_openai *f = fake_openai_start((uint16_t)port, (int)delay_us);
    if (!f) {
        fprintf(stderr, "kvik-fake-openai: cannot listen on 127.0.0.1:%ld\n", port);
        return 1;
    }
    printf("kvik-fake-openai: listening on http://127.0.0.1:%u\n", fake_openai_port(f));
    fflush(stdout);
    while (!g_stop) pause();
    fprintf(stderr, "kvik-fake-openai: %lld completion requests\n", (long long)fake_openai_requests(f));
    fake_openai_stop(f);
    return 0;
}
