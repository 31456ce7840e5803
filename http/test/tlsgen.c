/*
 * Test certificates (tlsgen.h): EC P-256 keys, SHA-256 signatures, serials
 * from the clock so two runs never present the same issuer and serial with
 * different keys to a client that caches them.
 */
#include "tlsgen.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static EVP_PKEY *new_key(void) { return EVP_EC_gen("P-256"); }

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
  if (ext == NULL)
    return -1;
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok ? 0 : -1;
}

/* A certificate for `key` named `cn`, signed by issuer_key (issuer NULL:
 * by itself, a CA). */
static X509 *new_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, long serial) {
  X509 *c = X509_new();
  if (c == NULL)
    return NULL;
  X509_set_version(c, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c), serial);
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c), 86400);
  X509_set_pubkey(c, key);
  X509_NAME *name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
  X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name);
  X509 *iss = issuer ? issuer : c;
  int bad = add_ext(c, iss, NID_subject_key_identifier, "hash") ||
            add_ext(c, iss, NID_authority_key_identifier, "keyid:always");
  if (issuer == NULL)
    bad = bad || add_ext(c, iss, NID_basic_constraints, "critical,CA:TRUE") ||
          add_ext(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
  else
    bad = bad || add_ext(c, iss, NID_basic_constraints, "critical,CA:FALSE") ||
          add_ext(c, iss, NID_key_usage, "critical,digitalSignature") ||
          add_ext(c, iss, NID_ext_key_usage, "serverAuth") ||
          add_ext(c, iss, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1");
  if (bad || !X509_sign(c, issuer_key, EVP_sha256())) {
    X509_free(c);
    return NULL;
  }
  return c;
}

static int write_pem(const char *dir, const char *file, X509 *cert, EVP_PKEY *key) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  if (key)
    chmod(path, 0600);
  int ok = cert ? PEM_write_X509(f, cert) : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
  return fclose(f) == 0 && ok ? 0 : -1;
}

int tlsgen_write(const char *dir) {
  int rc = -1;
  long serial = (long)time(NULL);
  EVP_PKEY *ca_key = new_key(), *key = new_key(), *other = new_key();
  X509 *ca = NULL, *cert = NULL;
  if (ca_key == NULL || key == NULL || other == NULL)
    goto out;
  if ((ca = new_cert(ca_key, "lith test CA", NULL, ca_key, serial)) == NULL ||
      (cert = new_cert(key, "localhost", ca, ca_key, serial + 1)) == NULL)
    goto out;
  if (write_pem(dir, "ca.pem", ca, NULL) || write_pem(dir, "cert.pem", cert, NULL) ||
      write_pem(dir, "key.pem", NULL, key) || write_pem(dir, "other-key.pem", NULL, other))
    goto out;
  rc = 0;
out:
  if (rc != 0)
    fprintf(stderr, "tlsgen: cannot write the test certificates in %s\n", dir);
  X509_free(cert);
  X509_free(ca);
  EVP_PKEY_free(other);
  EVP_PKEY_free(key);
  EVP_PKEY_free(ca_key);
  return rc;
}
