/* Writes, reads back and checks through a running `hscm serve`, with both APIs.
 * Build, from the repository's root (scripts/build-c.sh puts the library and header
 * under target/c):
 *   bash scripts/build-c.sh
 *   cc -O2 -Itarget/c/include crates/hscm-ring/c/example.c -Ltarget/c/lib -lhscm_ring -o ring-example
 * Run:   LD_LIBRARY_PATH=target/c/lib ./ring-example NAME   (exit 0 when every check passed) */
#include <stdio.h>
#include <string.h>
#include "hscm_ring.h"

#define CHECK(cond, what)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "FAILED: %s: %s\n", what, hscm_ring_last_error());   \
            return 1;                                                              \
        }                                                                          \
    } while (0)

struct compare {
    const char *expect;
    size_t len;
    int same;
};

static void compare_in_place(void *ctx, const void *bytes, size_t len) {
    struct compare *c = ctx;
    c->same = len == c->len && memcmp(bytes, c->expect, len) == 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ENDPOINT\n", argv[0]);
        return 2;
    }
    hscm_ring_client *c = hscm_ring_connect(argv[1], 1, 1 << 20);
    CHECK(c != NULL, "connect");
    hscm_ring_queue *q = hscm_ring_queue_open(c);
    CHECK(q != NULL, "queue");
    uint64_t size = hscm_ring_volume_size(c);
    CHECK(size >= 1 << 20, "volume size");

    static char data[200000], back[200000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 31 + 7);
    CHECK(hscm_ring_write(q, 1001, data, sizeof data, 1) == 0, "blocking write");
    CHECK(hscm_ring_read(q, 1001, back, sizeof back) == 0, "blocking read");
    CHECK(memcmp(data, back, sizeof data) == 0, "read back what was written");
    CHECK(hscm_ring_flush(q) == 0, "flush");

    /* The bytes where the server put them, no copy on this side. */
    struct compare cmp = {data + 5000, 70000, 0};
    CHECK(hscm_ring_read_in_place(q, 1001 + 5000, 70000, compare_in_place, &cmp) == 0 && cmp.same,
          "in-place read");
    CHECK(hscm_ring_read_in_place(q, 0, (1 << 20) + 1, compare_in_place, &cmp) == -1,
          "in-place read larger than the data buffer is an error");

    /* Out of range: the server's status comes back, the queue stays usable. */
    CHECK(hscm_ring_read(q, size - 10, back, 20) == HSCM_RING_OUT_OF_RANGE, "out-of-range status");

    uint32_t ids[4];
    for (int k = 0; k < 4; k++)
        CHECK(hscm_ring_submit_write(q, 500000 + 4096 * k, data + k, 4096, 0, &ids[k]) == 0, "submit write");
    for (int k = 0; k < 4; k++) {
        hscm_ring_completion done;
        CHECK(hscm_ring_complete(q, &done, NULL, 0) == 0 && done.status == 0, "complete write");
    }
    uint32_t id;
    CHECK(hscm_ring_submit_read(q, 500000 + 4096 * 2, 4096, &id) == 0, "submit read");
    hscm_ring_completion done;
    CHECK(hscm_ring_complete(q, &done, back, sizeof back) == 0, "complete read");
    CHECK(done.id == id && done.status == 0 && done.len == 4096, "completion fields");
    CHECK(memcmp(back, data + 2, 4096) == 0, "submitted read data");

    hscm_ring_queue_close(q);
    hscm_ring_disconnect(c);
    printf("ok\n");
    return 0;
}
