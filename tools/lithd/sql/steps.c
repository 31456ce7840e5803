/*
 * The steps of a batch (Hrana's batch and sequence, an interactive
 * transaction's requests), on any store: the rules of sqljson_int.h
 * ("Steps") in one place. A store gives the calls that differ
 * (lithd_steps_ops): how one statement runs, how a nested savepoint is
 * kept or undone, whether a failure ended the run, and, for a held
 * transaction, how the stream's connection commits. The local store runs
 * them on lith's writer or a reader (sqljson_run.c), the dqlite store on
 * its writer's command or a leader connection (store/dqlite.c).
 *
 * Why the client's BEGIN, COMMIT and ROLLBACK are interpreted here, not
 * run: the command's transaction is the writer's, shared with every other
 * command of its group commit. A BEGIN opens a nested savepoint; its COMMIT
 * releases it and its ROLLBACK undoes it, so what the client sees is what
 * its own connection would have done, and what commits is decided by the
 * writer.
 */
#include "sqljson_int.h"

#include <stdio.h>
#include <string.h>

#include "lith.h"

/* Private codes of a steps run: its transaction's ROLLBACK step ran (the
 * savepoint around it is undone), or it is open after the last step. */
#define STEPS_ROLLED_BACK (LITH_USER + 100)
#define STEPS_LEFT_OPEN (LITH_USER + 101)

static int cond_holds(const lithd_steps *s, const step_cond *c) {
  const lithd_result *r = s->r;
  switch (c->op) {
  case COND_OK: return c->step >= 0 && c->step < r->nouts && r->outs[c->step].state == STEP_OK;
  case COND_ERROR: return c->step >= 0 && c->step < r->nouts && r->outs[c->step].state == STEP_FAILED;
  case COND_NOT: return !cond_holds(s, &c->kids[0]);
  case COND_AND:
    for (int k = 0; k < c->n; k++)
      if (!cond_holds(s, &c->kids[k]))
        return 0;
    return 1;
  case COND_OR:
    for (int k = 0; k < c->n; k++)
      if (cond_holds(s, &c->kids[k]))
        return 1;
    return 0;
  default: return !s->in_tx; /* COND_AUTOCOMMIT */
  }
}

/* Step i failed with the error in r->err: that becomes the step's own,
 * and the run goes on. */
static int step_failed(lithd_steps *s, int i) {
  lithd_result *r = s->r;
  stmt_out *o = &r->outs[i];
  if (r->err.code == LITH_OK) /* a store's failure without words */
    lithd__fail(r, LITH_ERROR, i, "the statement failed");
  /* aligned: lithd_arena_copy packs bytes (a text before it left the
   * error misaligned: UBSan, once a batch's steps failed after its cells) */
  o->error = lithd_arena_alloc(&r->mem, sizeof *o->error, _Alignof(lithd_error));
  if (!o->error)
    return lithd__fail(r, LITH_NOMEM, i, "out of memory");
  memcpy(o->error, &r->err, sizeof *o->error);
  o->state = STEP_FAILED;
  lithd__error_clear(&r->err);
  return LITH_OK;
}

/* A step refused as SQLite refuses it (BEGIN inside a transaction, ...). */
static int step_refused(lithd_steps *s, int i, const char *msg) {
  lithd__fail(s->r, LITH_ERROR, i, "%s", msg);
  return step_failed(s, i);
}

static int one_step(lithd_steps *s) { return s->ops->run(s, s->cur); }

static int steps_from(lithd_steps *s);

static int tx_body(lithd_steps *s) {
  s->in_tx = 1;
  return steps_from(s);
}

/* Step i is a BEGIN: LITH_OK to go on with the step after the transaction
 * (or, held or on a snapshot, after the BEGIN), else what ends the run. */
static int begin_step(lithd_steps *s, int i) {
  const lithd_steps_ops *ops = s->ops;
  lithd_result *r = s->r;
  int rc;
  if (s->in_tx)
    return step_refused(s, i, "cannot start a transaction within a transaction");
  if (s->b->held && ops->end != NULL && i > 0) {
    /* held: what ran before in autocommit commits now, as SQLite's
     * autocommit statements would have (the command is alone) */
    if ((rc = ops->end(s, TXC_COMMIT, i)) != LITH_OK) {
      char why[sizeof r->err.message];
      snprintf(why, sizeof why, "%s", r->err.message);
      return lithd__fail(r, rc, i, "committing the statements before BEGIN: %s", why);
    }
  }
  r->outs[i].state = STEP_OK;
  if (ops->nest == NULL || s->b->held) { /* a snapshot already; held: the command is the transaction */
    s->in_tx = 1;
    return LITH_OK;
  }
  rc = ops->nest(s, tx_body, -1);
  s->in_tx = 0;
  if (rc == LITH_OK || rc == STEPS_ROLLED_BACK || (rc == STEPS_LEFT_OPEN && s->b->closing))
    return LITH_OK; /* closing: the savepoint was undone, as the stream's close rolls it back */
  if (rc == STEPS_LEFT_OPEN)
    return lithd__fail(r, LITHD_BAD_REQUEST, i,
                       "the transaction begun at step %d is still open after the last step: a batch must "
                       "end its transaction (COMMIT or ROLLBACK)",
                       i);
  return rc;
}

/* Step i is a COMMIT or a ROLLBACK (txctl): LITH_OK to go on, or what
 * returns from the BEGIN's savepoint (tx_body), or what ends the run. */
static int end_step(lithd_steps *s, int i, int txctl) {
  const lithd_steps_ops *ops = s->ops;
  lithd_result *r = s->r;
  if (!s->in_tx)
    return step_refused(s, i,
                        txctl == TXC_COMMIT ? "cannot commit - no transaction is active"
                                            : "cannot rollback - no transaction is active");
  if (s->b->held) { /* the command is the transaction: end it here and go on */
    int rc = ops->end != NULL ? ops->end(s, txctl, i) : LITH_OK; /* a snapshot: nothing to keep */
    if (rc != LITH_OK) {
      if (ops->ended != NULL && ops->ended(s))
        return rc;
      return step_failed(s, i); /* a deferred FOREIGN KEY: still open */
    }
    r->outs[i].state = STEP_OK;
    r->tx_end = txctl;
    r->tx_end_step = i;
    s->in_tx = 0;
    return LITH_OK;
  }
  r->outs[i].state = STEP_OK;
  if (ops->nest != NULL) /* tx_body returns: the store keeps or undoes the savepoint */
    return txctl == TXC_COMMIT ? LITH_OK : STEPS_ROLLED_BACK;
  s->in_tx = 0;
  return LITH_OK;
}

/* Run the steps from s->next to the end, or, inside the stream's
 * transaction in a savepoint, to its COMMIT (LITH_OK) or ROLLBACK
 * (STEPS_ROLLED_BACK). Any other code fails the whole run (r->err says
 * why). */
static int steps_from(lithd_steps *s) {
  const lithd_steps_ops *ops = s->ops;
  const lithd_batch *b = s->b;
  lithd_result *r = s->r;
  int rc;
  while (s->next < b->n) {
    int i = s->next++;
    const stmt_spec *spec = &b->stmts[i];
    stmt_out *o = &r->outs[i];
    r->n = i + 1;
    if (spec->cond != NULL && !cond_holds(s, spec->cond)) {
      o->state = STEP_SKIPPED;
      continue;
    }
    if (spec->fk_set != FK_NONE && b->held && ops->foreign_keys != NULL) {
      /* SQLite changes it between transactions only: in autocommit here,
       * a no-op inside the stream's transaction */
      if (!s->in_tx && (rc = ops->foreign_keys(s, spec->fk_set == FK_ON, i)) != LITH_OK) {
        if ((rc = step_failed(s, i)) != LITH_OK)
          return rc;
        continue;
      }
      o->state = STEP_OK;
      continue;
    }
    if (spec->txctl == TXC_BEGIN) {
      if ((rc = begin_step(s, i)) != LITH_OK)
        return rc;
      continue;
    }
    if (spec->txctl == TXC_COMMIT || spec->txctl == TXC_ROLLBACK) {
      int in_savepoint = s->in_tx && !b->held && ops->nest != NULL;
      rc = end_step(s, i, spec->txctl);
      if (rc != LITH_OK || in_savepoint)
        return rc;
      continue;
    }
    if (ops->nest != NULL && spec->txctl != TXC_SAVEPOINT && !(spec->chained && s->in_tx && !b->held)) {
      s->cur = i;
      rc = ops->nest(s, one_step, i);
    } else { /* a reader's; the client's savepoint (it fails whole or not at
                all); a chained step (the batch's ROLLBACK undoes it) */
      rc = ops->run(s, i);
    }
    if (rc == LITH_OK) {
      o->state = STEP_OK;
      continue;
    }
    /* What ends the run: the transaction around it is gone (an interrupted
     * write, a full disk, a lost connection), the run limit (every later
     * statement would be cut too), a stop, no memory. */
    if (rc == LITHD_TIMEOUT || rc == LITH_CLOSED || rc == LITH_NOMEM || rc == LITH_INTERRUPTED ||
        (ops->fatal != NULL && ops->fatal(s, i, rc))) {
      if (r->err.code == LITH_OK)
        lithd__fail(r, rc, i, "%s", lith_errstr(rc));
      return rc;
    }
    if ((rc = step_failed(s, i)) != LITH_OK)
      return rc;
  }
  if (b->held)
    return LITH_OK; /* the stream's transaction may stay open: the command holds it */
  if (s->in_tx && ops->nest != NULL)
    return STEPS_LEFT_OPEN;
  if (s->in_tx && b->closing) { /* a snapshot's: nothing to undo */
    s->in_tx = 0;
    return LITH_OK;
  }
  if (s->in_tx)
    return lithd__fail(r, LITHD_BAD_REQUEST, -1,
                       "a transaction is still open after the last step: a batch must end its transaction "
                       "(COMMIT or ROLLBACK)");
  return LITH_OK;
}

int lithd__steps_nested(void *arg) {
  lithd_steps_nest *n = arg;
  return n->rc = n->fn(n->s);
}

int lithd__steps_run(lithd_steps *s) {
  s->next = 0;
  s->in_tx = s->b->start_in_tx;
  int rc = steps_from(s);
  s->r->in_tx = s->in_tx;
  if (rc == STEPS_LEFT_OPEN) /* only from inside a savepoint */
    rc = LITHD_BAD_REQUEST;
  return rc;
}
