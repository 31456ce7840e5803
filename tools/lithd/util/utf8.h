/*
 * lithd utf8 — the one UTF-8 check of lithd: what json.c accepts in a
 * request and what sqljson lets out in an answer are the same set.
 *
 * Well-formed means RFC 3629: no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing past U+10FFFF — what a JSON parser accepts.
 */
#ifndef LITHD_UTF8_H
#define LITHD_UTF8_H

#include <stddef.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence at p, of which n >= 1
 * bytes may be read, or 0 when p does not start one. */
size_t lithd_utf8_len(const unsigned char *p, size_t n);

/* 1 if p[0..n) is well-formed UTF-8 throughout (n == 0 is), else 0. */
int lithd_utf8_valid(const unsigned char *p, size_t n);

/* Write code point cp (at most U+10FFFF, not a surrogate: the caller's to
 * check) as UTF-8 to out, which has room for 4 bytes; returns the length. */
size_t lithd_utf8_put(char *out, unsigned cp);

#endif /* LITHD_UTF8_H */
