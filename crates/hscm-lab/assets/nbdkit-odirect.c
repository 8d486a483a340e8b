/* An nbdkit plugin for `hscm bench nbd`: the least an NBD server can do when every
 * write must reach the device before it is acknowledged. Each request is one
 * O_DIRECT pread/pwrite on a file (through a per-thread aligned buffer, since O_DIRECT
 * needs aligned memory and nbdkit's buffers are not), in nbdkit's parallel thread
 * model. It is a baseline for write-through exports, not a server anyone should use:
 * requests must be multiples of 4 KiB at 4 KiB offsets.
 *
 * Run through nbdkit's cc plugin: nbdkit cc - file=PATH < nbdkit-odirect.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define ALIGNMENT 4096

static char *path;
static int fd = -1;
static int64_t size;

/* One aligned bounce buffer per nbdkit thread, grown to the largest request seen. */
static __thread void *bounce;
static __thread size_t bounce_len;

static int
odirect_config (const char *key, const char *value)
{
  if (strcmp (key, "file") != 0) {
    nbdkit_error ("unknown parameter %s (this plugin takes file=PATH)", key);
    return -1;
  }
  free (path);
  path = nbdkit_realpath (value);
  return path ? 0 : -1;
}

static int
odirect_config_complete (void)
{
  struct stat st;
  if (!path) {
    nbdkit_error ("file=PATH is required");
    return -1;
  }
  fd = open (path, O_RDWR | O_DIRECT | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0) {
    nbdkit_error ("%s: %m", path);
    return -1;
  }
  size = st.st_size;
  return 0;
}

static void
odirect_unload (void)
{
  if (fd >= 0)
    close (fd);
  free (path);
}

static void *
odirect_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
odirect_get_size (void *handle)
{
  return size;
}

static int
odirect_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                    uint32_t *maximum)
{
  *minimum = ALIGNMENT;
  *preferred = ALIGNMENT;
  *maximum = 32 * 1024 * 1024;
  return 0;
}

static void *
buffer_for (size_t count)
{
  if (bounce_len < count) {
    free (bounce);
    bounce = NULL;
    bounce_len = 0;
    if (posix_memalign (&bounce, ALIGNMENT, count) != 0) {
      bounce = NULL;
      nbdkit_error ("out of memory for a %zu-byte buffer", count);
      return NULL;
    }
    bounce_len = count;
  }
  return bounce;
}

static int
check_aligned (uint32_t count, uint64_t offset)
{
  if (count % ALIGNMENT != 0 || offset % ALIGNMENT != 0) {
    nbdkit_error ("unaligned request: %u bytes at %llu", count,
                  (unsigned long long) offset);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

static int
odirect_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  void *b;
  if (check_aligned (count, offset) < 0 || !(b = buffer_for (count)))
    return -1;
  if (pread (fd, b, count, offset) != (ssize_t) count) {
    nbdkit_error ("pread: %m");
    return -1;
  }
  memcpy (buf, b, count);
  return 0;
}

static int
odirect_flush (void *handle, uint32_t flags)
{
  if (fdatasync (fd) < 0) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }
  return 0;
}

static int
odirect_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  void *b;
  if (check_aligned (count, offset) < 0 || !(b = buffer_for (count)))
    return -1;
  memcpy (b, buf, count);
  if (pwrite (fd, b, count, offset) != (ssize_t) count) {
    nbdkit_error ("pwrite: %m");
    return -1;
  }
  return (flags & NBDKIT_FLAG_FUA) ? odirect_flush (handle, 0) : 0;
}

static int
odirect_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
odirect_can_multi_conn (void *handle)
{
  return 1;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static struct nbdkit_plugin plugin = {
  .name = "odirect",
  .version = "1",
  .config = odirect_config,
  .config_complete = odirect_config_complete,
  .unload = odirect_unload,
  .open = odirect_open,
  .get_size = odirect_get_size,
  .block_size = odirect_block_size,
  .pread = odirect_pread,
  .pwrite = odirect_pwrite,
  .flush = odirect_flush,
  .can_fua = odirect_can_fua,
  .can_multi_conn = odirect_can_multi_conn,
};

NBDKIT_REGISTER_PLUGIN (plugin)
