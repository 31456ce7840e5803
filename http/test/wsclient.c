/*
 * A raw WebSocket client for tests (wsclient.h). SHA-1 is here only to
 * check the server's Sec-WebSocket-Accept (RFC 6455 section 4.2.2).
 */
#include "wsclient.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static uint32_t rol(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

static void sha1(const unsigned char *msg, size_t len, unsigned char out[20]) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  size_t total = ((len + 8) / 64 + 1) * 64;
  unsigned char *m = calloc(1, total);
  if (m == NULL)
    return;
  memcpy(m, msg, len);
  m[len] = 0x80;
  uint64_t bits = (uint64_t)len * 8;
  for (int i = 0; i < 8; i++)
    m[total - 1 - i] = (unsigned char)(bits >> (8 * i));
  for (size_t off = 0; off < total; off += 64) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
      w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 |
             (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
    for (int i = 16; i < 80; i++)
      w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
      uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDC;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6;
      }
      uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rol(b, 30);
      b = a;
      a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  free(m);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 4; j++)
      out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

static void base64(const unsigned char *in, size_t n, char *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v =
        (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = tab[(v >> 18) & 63];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
    out[o++] = i + 2 < n ? tab[v & 63] : '=';
  }
  out[o] = '\0';
}

int wsc_tcp(int port, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (rcvbuf > 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int recv_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n > 0) {
    ssize_t k = recv(fd, c, n, 0);
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

const char *wsc_header(const char *head, const char *name, char *out, size_t cap) {
  size_t n = strlen(name);
  for (const char *p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
    const char *l = p + 2;
    if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
      l += n + 1;
      while (*l == ' ')
        l++;
      size_t k = strcspn(l, "\r\n");
      if (k >= cap)
        k = cap - 1;
      memcpy(out, l, k);
      out[k] = '\0';
      return out;
    }
  }
  return NULL;
}

int wsc_handshake(int fd, const char *path, const char *protocols, const char *extra, char *head,
                  size_t cap) {
  static const char key[] = "dGhlIHNhbXBsZSBub25jZQ==";
  char req[2048];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s%s%s%s\r\n",
                   path, key, protocols ? "Sec-WebSocket-Protocol: " : "", protocols ? protocols : "",
                   protocols ? "\r\n" : "", extra ? extra : "");
  if (n <= 0 || (size_t)n >= sizeof req || send_all(fd, req, (size_t)n) != 0)
    return -1;
  size_t len = 0;
  while (len + 1 < cap) {
    if (recv(fd, head + len, 1, 0) != 1)
      return -1;
    len++;
    head[len] = '\0';
    if (len >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0)
      break;
  }
  int status = 0;
  if (sscanf(head, "HTTP/1.1 %d", &status) != 1)
    return -1;
  if (status == 101) {
    char want[64], got[64], cat[128];
    unsigned char d[20];
    snprintf(cat, sizeof cat, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    sha1((const unsigned char *)cat, strlen(cat), d);
    base64(d, sizeof d, want);
    if (wsc_header(head, "sec-websocket-accept", got, sizeof got) == NULL || strcmp(got, want) != 0)
      return -2;
  }
  return status;
}

int wsc_open(int port, const char *path, const char *protocols, const char *extra) {
  char head[4096];
  int fd = wsc_tcp(port, 0);
  if (fd < 0)
    return -1;
  if (wsc_handshake(fd, path, protocols, extra, head, sizeof head) != 101) {
    close(fd);
    return -1;
  }
  return fd;
}

int wsc_send_frame(int fd, int fin, int opcode, const void *p, size_t n, int mask) {
  unsigned char h[14];
  size_t hl = 2;
  h[0] = (unsigned char)((fin ? 0x80 : 0) | (opcode & 0x0f));
  if (n < 126) {
    h[1] = (unsigned char)n;
  } else if (n < 65536) {
    h[1] = 126;
    h[2] = (unsigned char)(n >> 8);
    h[3] = (unsigned char)n;
    hl = 4;
  } else {
    h[1] = 127;
    for (int i = 0; i < 8; i++)
      h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
    hl = 10;
  }
  static const unsigned char key[4] = {0x37, 0xfa, 0x21, 0x3d};
  if (mask) {
    h[1] |= 0x80;
    memcpy(h + hl, key, 4);
    hl += 4;
  }
  unsigned char *buf = malloc(hl + n + 1);
  if (buf == NULL)
    return -1;
  memcpy(buf, h, hl);
  for (size_t i = 0; i < n; i++)
    buf[hl + i] = (unsigned char)(((const unsigned char *)p)[i] ^ (mask ? key[i % 4] : 0));
  int rc = send_all(fd, buf, hl + n);
  free(buf);
  return rc;
}

int wsc_send_text(int fd, const char *s) { return wsc_send_frame(fd, 1, WSC_TEXT, s, strlen(s), 1); }

long wsc_read_frame(int fd, int *opcode, char *buf, size_t cap, int *code) {
  unsigned char h[8];
  if (recv_all(fd, h, 2) != 0)
    return -1;
  *opcode = h[0] & 0x0f;
  uint64_t n = h[1] & 0x7f;
  if (n == 126) {
    if (recv_all(fd, h, 2) != 0)
      return -1;
    n = (uint64_t)h[0] << 8 | h[1];
  } else if (n == 127) {
    if (recv_all(fd, h, 8) != 0)
      return -1;
    n = 0;
    for (int i = 0; i < 8; i++)
      n = n << 8 | h[i];
  }
  if (n > ((uint64_t)1 << 30))
    return -1;
  char *all = malloc(n + 1);
  if (all == NULL || recv_all(fd, all, n) != 0) {
    free(all);
    return -1;
  }
  if (code != NULL)
    *code = *opcode == WSC_CLOSE && n >= 2 ? ((unsigned char)all[0] << 8 | (unsigned char)all[1]) : 0;
  size_t k = n < cap - 1 ? n : cap - 1;
  memcpy(buf, all, k);
  buf[k] = '\0';
  free(all);
  return (long)n;
}

long wsc_read_text(int fd, char *buf, size_t cap, int *code) {
  for (;;) {
    int op = 0;
    long n = wsc_read_frame(fd, &op, buf, cap, code);
    if (n < 0)
      return -1;
    if (op == WSC_CLOSE)
      return -2;
    if (op == WSC_TEXT || op == WSC_BINARY || op == 0)
      return n;
  }
}
