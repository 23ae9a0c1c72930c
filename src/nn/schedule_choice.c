/* The cuda backend's choice of schedule from the asked schedule, the batch and the device's
 * capabilities (schedule_choice.h). */
#include "nn/schedule_choice.h"

#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "nn/cuda/tuning.h"

_Static_assert(KEYER_CUDA_SEGMENT_MAX_BATCH >= KEYER_CUDA_PERSISTENT_MAX_BATCH,
               "AUTO's two batch limits");

const char *kr_schedule_name(kr_schedule_kind kind)
{
    switch (kind) {
    case KR_SCHEDULE_PER_NODE: return "per-node";
    case KR_SCHEDULE_PERSISTENT: return "persistent";
    case KR_SCHEDULE_PERSISTENT_CLUSTER: return "persistent+cluster";
    }
    return "?";
}

int kr_schedule_per_node_by_config(int asked, int batch, double macs)
{
    const int auto_ = asked == KEYER_CUDA_SCHEDULE_AUTO;
    return asked == KEYER_CUDA_SCHEDULE_KERNELS ||
           (auto_ && (batch > KEYER_CUDA_SEGMENT_MAX_BATCH ||
                      macs * batch > KEYER_CUDA_PERSISTENT_MAX_MACS));
}

int kr_schedule_needs_segment(int asked, int batch)
{
    return asked == KEYER_CUDA_SCHEDULE_AUTO && batch > KEYER_CUDA_PERSISTENT_MAX_BATCH;
}

const char *kr_schedule_persistent_refusal(const kr_gpu_caps *caps, int blocks_per_sm)
{
    if (!caps->cooperative_launch)
        return "the device has no cooperative launch";
    if (blocks_per_sm < 1)
        return "the kernel does not fit on a multiprocessor";
    return NULL;
}

const char *kr_schedule_segment_refusal(const kr_gpu_caps *caps, int cluster_blocks,
                                        size_t smem_bytes)
{
    if (kr_gpu_cc(caps) < 90)
        return caps->emulated ? "thread-block clusters need compute 9.0 (emulating an older "
                                "class)"
                              : "thread-block clusters need compute 9.0";
    if (!caps->cluster_launch)
        return "the device has no thread-block clusters";
    if (cluster_blocks < 1 || cluster_blocks > 16)
        return "its cluster size is outside 1..16 blocks";
    if (smem_bytes > caps->smem_block_optin)
        return "a block's shared memory is too small for it";
    return NULL;
}

keyer_status kr_schedule_parse(const char *spec, const char *what, int *schedule,
                               keyer_error *err)
{
    static const struct {
        const char *name;
        keyer_cuda_schedule schedule;
    } names[] = {
        {"auto", KEYER_CUDA_SCHEDULE_AUTO},
        {"kernels", KEYER_CUDA_SCHEDULE_KERNELS},
        {"persistent", KEYER_CUDA_SCHEDULE_PERSISTENT},
        {"persistent-grid", KEYER_CUDA_SCHEDULE_PERSISTENT_GRID},
    };
    *schedule = KEYER_CUDA_SCHEDULE_AUTO;
    if (!spec || !spec[0])
        return KEYER_OK;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(spec, names[i].name)) {
            *schedule = (int)names[i].schedule;
            return KEYER_OK;
        }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "%s=\"%s\": not a cuda schedule (kernels, persistent, "
                           "persistent-grid or auto)",
                           what, spec);
}

keyer_status kr_schedule_from_env(int asked, int *schedule, keyer_error *err)
{
    *schedule = asked;
    if (asked != KEYER_CUDA_SCHEDULE_AUTO)
        return KEYER_OK;
    return kr_schedule_parse(getenv(KR_SCHEDULE_ENV), KR_SCHEDULE_ENV, schedule, err);
}
