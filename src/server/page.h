/*
 * page.h — the chat page `kvik serve` answers at GET /: one HTML file
 * (src/server/chat_page.html) with its CSS and script inline, no outside
 * resource, built into the binary by the Makefile.
 */
#ifndef KVIK_SERVER_PAGE_H
#define KVIK_SERVER_PAGE_H

extern const unsigned char kvik_chat_page[];
extern const unsigned long kvik_chat_page_len;

#endif
