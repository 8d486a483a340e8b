/* hscm_ring.h: C client of hscm's shared-memory queue transport.
 *
 * A server (`hscm serve VOLUME --shm NAME`) hands each connected client a private
 * region with submission/completion queues and a data buffer; see docs/ring.md.
 * Link with -lhscm_ring (target/release/libhscm_ring.so or .a).
 *
 * Every int-returning call returns 0 on success, a positive hscm_ring_status_t when
 * the server refused the command, and -1 on a local error; hscm_ring_last_error()
 * then says what happened (per thread). A queue belongs to one thread at a time.
 */
#ifndef HSCM_RING_H
#define HSCM_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CClient hscm_ring_client;
typedef struct CQueue hscm_ring_queue;

typedef enum {
    HSCM_RING_OK = 0,
    HSCM_RING_BAD_OPCODE = 1,
    HSCM_RING_BAD_FIELD = 2,
    HSCM_RING_BAD_COUNT = 3,
    HSCM_RING_BAD_BUFFER = 4,
    HSCM_RING_BUFFER_BUSY = 5,
    HSCM_RING_OUT_OF_RANGE = 6,
    HSCM_RING_READ_ONLY = 7,
    HSCM_RING_IO_ERROR = 8
} hscm_ring_status_t;

typedef struct {
    uint32_t id;
    uint32_t status; /* hscm_ring_status_t */
    uint32_t len;    /* bytes transferred */
} hscm_ring_completion;

const char *hscm_ring_last_error(void);

/* endpoint: the NAME given to --shm, or a socket path. queues/db_bytes: 0 = default. */
hscm_ring_client *hscm_ring_connect(const char *endpoint, uint32_t queues, uint64_t db_bytes);
void hscm_ring_disconnect(hscm_ring_client *client);
uint64_t hscm_ring_volume_size(const hscm_ring_client *client);

hscm_ring_queue *hscm_ring_queue_open(hscm_ring_client *client);
void hscm_ring_queue_close(hscm_ring_queue *queue);

/* Blocking calls; any byte offset and length. fua != 0: durable on return. */
int hscm_ring_read(hscm_ring_queue *queue, uint64_t offset, void *buf, size_t len);
int hscm_ring_write(hscm_ring_queue *queue, uint64_t offset, const void *buf, size_t len, int fua);
int hscm_ring_flush(hscm_ring_queue *queue);

/* One-copy read: use_bytes(ctx, data, len) gets the bytes where the server put them, in
 * this client's data buffer; data is valid during the call only. len is at most the data
 * buffer; nothing submitted may be in flight on the queue. */
int hscm_ring_read_in_place(hscm_ring_queue *queue, uint64_t offset, size_t len,
                            void (*use_bytes)(void *ctx, const void *data, size_t len), void *ctx);

/* Submit/complete: up to the queue depth in flight; lengths up to the data buffer. */
int hscm_ring_submit_read(hscm_ring_queue *queue, uint64_t offset, uint32_t len, uint32_t *id);
int hscm_ring_submit_write(hscm_ring_queue *queue, uint64_t offset, const void *buf, uint32_t len,
                           int fua, uint32_t *id);
/* Waits for the next completion; a read's bytes go to buf (buf_len bytes of room).
 * A read that does not fit returns -1 with *out filled (out->len is the room needed)
 * and is kept: the next call returns it again. */
int hscm_ring_complete(hscm_ring_queue *queue, hscm_ring_completion *out, void *buf, size_t buf_len);

#ifdef __cplusplus
}
#endif

#endif
