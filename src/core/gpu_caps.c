/* Device capabilities: the compute-capability classes' limits, and emulating an older class
 * (gpu_caps.h). */
#include "core/gpu_caps.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA C++ Programming Guide's "Technical Specifications per Compute Capability": resident
 * blocks and warps per multiprocessor, shared memory per multiprocessor and the most a block
 * may opt in to (KB), shared memory the system reserves per block (bytes: 1 KB from 8.0). Every
 * class has 64 K registers per multiprocessor and per block, 1024 threads per block and 48 KB
 * of shared memory per block without opting in. */
typedef struct gpu_class {
    int major, minor;
    int blocks_sm, warps_sm;
    int smem_sm_kb, smem_block_kb;
    int reserved;
} gpu_class;

static const gpu_class classes[] = {
    {7, 5, 16, 32, 64, 64, 0},      /* Turing: T4, RTX 20 */
    {8, 0, 32, 64, 164, 163, 1024}, /* A100, A30 */
    {8, 6, 16, 48, 100, 99, 1024},  /* RTX 30, A10, A40 */
    {8, 7, 16, 48, 164, 163, 1024}, /* Jetson Orin */
    {8, 9, 24, 48, 100, 99, 1024},  /* Ada: RTX 40, L4, L40S */
    {9, 0, 32, 64, 228, 227, 1024}, /* Hopper: H100, H200 */
    {10, 0, 32, 64, 228, 227, 1024}, /* Blackwell: B200 */
    {12, 0, 32, 48, 128, 99, 1024}, /* Blackwell: RTX 50, RTX PRO */
};
#define N_CLASSES (int)(sizeof(classes) / sizeof(classes[0]))

static const gpu_class *find_class(int major, int minor)
{
    for (int i = 0; i < N_CLASSES; i++)
        if (classes[i].major == major && classes[i].minor == minor)
            return &classes[i];
    return NULL;
}

int kr_gpu_class_limits(int major, int minor, kr_gpu_caps *out)
{
    const gpu_class *c = find_class(major, minor);
    if (!c)
        return 0;
    memset(out, 0, sizeof(*out));
    out->major = out->real_major = major;
    out->minor = out->real_minor = minor;
    out->smem_block = 48 * 1024;
    out->smem_block_optin = (size_t)c->smem_block_kb * 1024;
    out->smem_sm = (size_t)c->smem_sm_kb * 1024;
    out->smem_reserved_block = (size_t)c->reserved;
    out->regs_block = out->regs_sm = 64 * 1024;
    out->threads_block = 1024;
    out->threads_sm = c->warps_sm * 32;
    out->blocks_sm = c->blocks_sm;
    out->cooperative_launch = 1;
    out->cluster_launch = major >= 9;
    return 1;
}

/* "7.5, 8.0, ..." into @p buf. */
static void class_list(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < N_CLASSES && n < size; i++) {
        int w = snprintf(buf + n, size - n, "%s%d.%d", i ? ", " : "", classes[i].major,
                         classes[i].minor);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

keyer_status kr_gpu_emulate_parse(const char *spec, const char *what, int *major, int *minor,
                                  keyer_error *err)
{
    *major = *minor = 0;
    if (!spec || !spec[0])
        return KEYER_OK;
    const char *p = spec;
    if (!strncmp(p, "sm_", 3))
        p += 3;
    else if (!strncmp(p, "compute_", 8))
        p += 8;
    int ma = -1, mi = -1;
    const size_t len = strlen(p);
    if (len >= 3 && len <= 4 && p[len - 2] == '.' && isdigit((unsigned char)p[len - 1])) {
        /* "8.6", "10.0" */
        int ok = 1;
        for (size_t i = 0; i + 2 < len; i++)
            ok = ok && isdigit((unsigned char)p[i]);
        if (ok) {
            ma = atoi(p);
            mi = p[len - 1] - '0';
        }
    } else if (len >= 2 && len <= 3) { /* "86", "100" */
        int ok = 1;
        for (size_t i = 0; i < len; i++)
            ok = ok && isdigit((unsigned char)p[i]);
        if (ok) {
            int v = atoi(p);
            ma = v / 10;
            mi = v % 10;
        }
    }
    char list[128];
    class_list(list, sizeof(list));
    if (ma < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s=\"%s\": not a compute capability (write it as 8.6, 86 or "
                               "sm_86; keyer knows %s)",
                               what, spec, list);
    if (!find_class(ma, mi))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s=\"%s\": compute capability %d.%d is not one keyer is built "
                               "for (%s)",
                               what, spec, ma, mi, list);
    *major = ma;
    *minor = mi;
    return KEYER_OK;
}

static size_t min_z(size_t a, size_t b) { return a < b ? a : b; }
static int min_i(int a, int b) { return a < b ? a : b; }

keyer_status kr_gpu_caps_emulate(const kr_gpu_caps *real, int major, int minor, kr_gpu_caps *out,
                                 keyer_error *err)
{
    kr_gpu_caps c = *real;
    if (major == 0) {
        *out = c;
        return KEYER_OK;
    }
    kr_gpu_caps cls;
    if (!kr_gpu_class_limits(major, minor, &cls))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "cannot emulate compute capability %d.%d: not a class keyer is "
                               "built for",
                               major, minor);
    if (major * 10 + minor > real->real_major * 10 + real->real_minor)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "cannot emulate compute capability %d.%d on a %d.%d device: only "
                               "older classes can be emulated (a newer one's instructions are "
                               "missing)",
                               major, minor, real->real_major, real->real_minor);
    c.major = major;
    c.minor = minor;
    c.emulated = major != real->real_major || minor != real->real_minor;
    c.smem_block = min_z(c.smem_block, cls.smem_block);
    c.smem_block_optin = min_z(c.smem_block_optin, cls.smem_block_optin);
    c.smem_sm = min_z(c.smem_sm, cls.smem_sm);
    c.smem_reserved_block =
        c.smem_reserved_block > cls.smem_reserved_block ? c.smem_reserved_block
                                                        : cls.smem_reserved_block;
    c.regs_block = min_i(c.regs_block, cls.regs_block);
    c.regs_sm = min_i(c.regs_sm, cls.regs_sm);
    c.threads_block = min_i(c.threads_block, cls.threads_block);
    c.threads_sm = min_i(c.threads_sm, cls.threads_sm);
    c.blocks_sm = min_i(c.blocks_sm, cls.blocks_sm);
    c.cooperative_launch = c.cooperative_launch && cls.cooperative_launch;
    c.cluster_launch = c.cluster_launch && cls.cluster_launch;
    *out = c;
    return KEYER_OK;
}

keyer_status kr_gpu_caps_from_env(const kr_gpu_caps *real, kr_gpu_caps *out, keyer_error *err)
{
    int major = 0, minor = 0;
    const char *spec = getenv(KR_GPU_EMULATE_ENV);
    keyer_status st = kr_gpu_emulate_parse(spec, KR_GPU_EMULATE_ENV, &major, &minor, err);
    if (st)
        return st;
    st = kr_gpu_caps_emulate(real, major, minor, out, err);
    return st ? keyer_error_prefix(err, "%s=\"%s\": ", KR_GPU_EMULATE_ENV, spec) : KEYER_OK;
}

void kr_gpu_caps_describe(const kr_gpu_caps *c, char *buf, size_t size)
{
    char emu[64] = "";
    if (c->emulated)
        snprintf(emu, sizeof(emu), " (emulated on a %d.%d device)", c->real_major,
                 c->real_minor);
    snprintf(buf, size,
             "compute %d.%d%s, %d SMs, shared memory %zu KB per block (opt-in), %zu KB per SM, "
             "%d threads and %d blocks per SM, %d K registers per SM, cooperative launch %s, "
             "thread-block clusters %s",
             c->major, c->minor, emu, c->sms, c->smem_block_optin / 1024, c->smem_sm / 1024,
             c->threads_sm, c->blocks_sm, c->regs_sm / 1024, c->cooperative_launch ? "yes" : "no",
             c->cluster_launch ? "yes" : "no");
}

int kr_gpu_blocks_per_sm(const kr_gpu_caps *caps, int threads, int regs, size_t smem_bytes)
{
    if (threads <= 0 || threads > caps->threads_block || smem_bytes > caps->smem_block_optin)
        return 0;
    const int warps = (threads + 31) / 32;
    const int warp_regs = (regs * 32 + 255) / 256 * 256; /* allocated per warp, 256 at a time */
    if (warp_regs * warps > caps->regs_block)
        return 0;
    int blocks = caps->threads_sm / (warps * 32);
    blocks = blocks < caps->blocks_sm ? blocks : caps->blocks_sm;
    if (warp_regs > 0) {
        const int by_regs = caps->regs_sm / warp_regs / warps;
        blocks = by_regs < blocks ? by_regs : blocks;
    }
    const size_t per_block = smem_bytes + caps->smem_reserved_block;
    if (per_block > 0) {
        const size_t by_smem = caps->smem_sm / per_block;
        blocks = by_smem < (size_t)blocks ? (int)by_smem : blocks;
    }
    return blocks;
}
