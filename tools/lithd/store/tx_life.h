/*
 * lithd tx_life — the life of a Hrana stream and of its transaction, as
 * one state machine: the states, which thread owns what in each, and which
 * transition frees what. routes/hrana_http.c keeps the stream's half,
 * store/local.c the transaction's; both follow this page, and a change to
 * either starts here. (A header of comments and names only: the two halves
 * live in two files, on two sides of the store seam, and this is the one
 * place that holds them together.)
 *
 * THE STREAM (hrana_http.c; the loop thread only)
 *
 *   FREE --(a pipeline that does not end with close: stream_take)--> BUSY
 *   BUSY --(its answer: finish)----------------------------------> IDLE
 *   IDLE --(a pipeline with its baton: stream_find)--------------> BUSY
 *   BUSY --(a close request ran, or lithd stops)-----------------> FREE
 *   IDLE --(idle past --stream-idle-ms: sweep; lithd stops;
 *           the table full and it the idle stream the longest
 *           without a transaction: stream_take)------------------> FREE
 *
 *   IDLE: the stream (its slot in the table) owns its stored SQL (charged
 *   to the answer budget), its transaction handle and that handle's
 *   reader slot (hr_tx). BUSY: the running pipeline (hr_pipe) owns all
 *   three; the slot holds nothing, and a second pipeline with the same
 *   baton is refused STREAM_BUSY. A pipeline that ends with close never
 *   takes a slot: it owns them from first to last. Going to FREE frees
 *   the stored SQL and closes the transaction (rolling back what is open)
 *   and gives its reader back (tx_end), which hands it to the first
 *   pipeline waiting for one (below). The slot's STREAM_COST leaves the
 *   budget with it. An IDLE stream whose transaction a bound ended
 *   (while others waited for its reader) gives that reader back without
 *   waiting for its next pipeline: reclaim_readers, from the FIFO's timer
 *   (every WAIT_POLL_MS while pipelines wait) and the sweep; the handle
 *   stays, so its next statement still learns why.
 *
 *   A pipeline whose BEGIN (deferred) or BEGIN TRANSACTION READONLY finds
 *   no reader to spare WAITS in a FIFO (hrana_http.c, open_tx): it owns its
 *   request, nothing else begun; a reader given back (tx_end) goes to the
 *   first one waiting for that database, which opens its transaction on
 *   it; past --tx-idle-ms (the timer) or at the stop it is refused
 *   (SQLITE_BUSY, SERVER_SHUTTING_DOWN) and its pipeline goes on. It never
 *   takes the writer.
 *
 * THE TRANSACTION (local.c, local_tx; its handle belongs to whoever holds
 * the stream's hr_tx, on the loop; the threads below share the fields
 * under t->mu, as local.c marks them)
 *
 *   BEGIN IMMEDIATE:   QUEUED --(lith runs tx_cmd)--> ON_WRITER
 *   BEGIN, READONLY:   ON_SNAPSHOT (its own thread, in one lith_read, on a
 *                      reader slot taken by the stream before the open)
 *   ON_SNAPSHOT --(a run writes, nothing committed since its snapshot:
 *                  snap_move submits the command)--------------> MOVING
 *   MOVING --(the writer's verdict "fresh": tx_cmd takes the run)--> ON_WRITER
 *   MOVING --(the verdict "stale": tx_cmd returns TX_STALE)----> ON_SNAPSHOT
 *                                       (stale: its writes fail SQLITE_BUSY)
 *   MOVING --(the command refused or never run)----------------> ENDED
 *   ON_WRITER, ON_SNAPSHOT --(COMMIT, ROLLBACK, a failed batch, close,
 *                  --tx-max-ms past, --tx-idle-ms past WHILE ANOTHER
 *                  WAITS for what it holds, lithd stops)-----------> ENDED
 *                                       (the bounds: store.h's one rule,
 *                                        lithd__tx_bound; "another waits":
 *                                        the store's writer queue beyond
 *                                        it, lithd_store_readers_wanted)
 *   ON_SNAPSHOT --(lith_rx_too_old while it waits between runs: the
 *                  WAL's hold waited past its bound for it)------> ENDED
 *                                       (SNAPSHOT_TOO_OLD)
 *   ENDED --(all of: the command answered, the handle closed, the
 *            uv_async closed, the snapshot's thread joined)------> FREED
 *
 *   Who owns what: QUEUED and MOVING, the command (t->ureq, inside the
 *   handle) is lith's until its callback (tx_cmd_done or tx_refused) runs
 *   on the loop: `flying` says so, and the handle is never freed while it
 *   is set, whatever ended the transaction meanwhile (a stale verdict
 *   lets the snapshot go on, and even end, while the writer is still
 *   finishing that command: freeing it then was issue 32's crash).
 *   ON_WRITER: the writer thread runs the client's batches one at a time
 *   (work -> running -> back, under mu) and holds the writer. ON_SNAPSHOT:
 *   its thread runs them on its reader; the loop only hands work in and
 *   takes answers out (the uv_async). A run in flight is the pipeline's
 *   lithd_store_req: lent from lithd_store_tx_run until its callback.
 *
 *   The dqlite store (dqlite.c, dq_tx) is this machine's writer half only:
 *   QUEUED (an alone command in the dqlite writer's queue) --> ON_WRITER
 *   (its callback on the writer thread) --> ENDED, every BEGIN alike
 *   (no snapshot); a leader lost ends it too (LITH_BUSY, or
 *   LITHD_OUTCOME_UNKNOWN at COMMIT). The handle is freed (tx_async_closed)
 *   once the writer answered the command and the handle was closed.
 *
 *   ENDED is what the loop learns, on the loop (cmd_done): from then on a
 *   run is refused with the reason (TRANSACTION_TIMEOUT, SNAPSHOT_TOO_OLD,
 *   or the end), lithd_store_tx_ended says 1, and get_autocommit answers
 *   true. The first run refused so lets the stream go of the handle
 *   (tx_done: tx_end): the reason is told once, and the stream's next
 *   statements run in autocommit, as sqld answers a stream whose
 *   transaction it rolled back. FREED: tx_maybe_free, on the loop, the only place that frees.
 *
 * THE BUDGET: everything above that a client makes lithd keep is charged
 * to the process's answer budget (sqljson.h): a stream's slot
 * (STREAM_COST), its stored SQL, a snapshot transaction (SNAPSHOT_COST: its
 * thread and its reader's cache), a pipeline's answer until its last byte
 * is sent. Past it, the refusal names --max-answer-mib.
 */
#ifndef LITHD_TX_LIFE_H
#define LITHD_TX_LIFE_H

#endif /* LITHD_TX_LIFE_H */
