/* The CPU backend's table and its state (created on first use, destroyed with the object). */
#include "render/cpu/cpu.h"

static void cpu_state_destroy(void *state)
{
    kr_cpu_state *s = state;
    if (!s)
        return;
    const keyer_allocator *a = kr_cpu_allocator(s);
    kr_threadpool_destroy(&s->pool);
    for (int i = 0; i < KR_CPU_SCRATCH_SLOTS; i++)
        keyer_free(a, s->scratch[i]);
    if (s->history) {
        for (int i = 0; i < s->max_streams; i++) {
            keyer_free(a, s->history[i].mask);
            keyer_free(a, s->history[i].luma);
        }
        keyer_free(a, s->history);
    }
    keyer_frame_destroy(&s->bg_cache);
    keyer_allocator copy = s->allocator;
    keyer_free(s->has_allocator ? &copy : NULL, s);
}

static keyer_status cpu_state_create(const kr_fx_config *config, void **out, keyer_error *err)
{
    kr_cpu_state *s = keyer_calloc(config->allocator, sizeof(*s), KEYER_ALIGNMENT);
    if (!s)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "CPU effects: out of memory");
    if (config->allocator) {
        s->allocator = *config->allocator;
        s->has_allocator = 1;
    }
    s->max_streams = config->max_streams > 0 ? config->max_streams : 1;
    s->history = keyer_calloc(config->allocator, sizeof(*s->history) * (size_t)s->max_streams,
                              KEYER_ALIGNMENT);
    if (!s->history) {
        cpu_state_destroy(s);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "CPU effects: out of memory");
    }
    keyer_status st = kr_threadpool_create(config->threads, &s->pool, err);
    if (st) {
        cpu_state_destroy(s);
        keyer_error_prefix(err, "CPU effects: ");
        return st;
    }
    s->threads = kr_threadpool_threads(s->pool);
    *out = s;
    return KEYER_OK;
}

const kr_fx_backend kr_fx_cpu = {
    "cpu", cpu_state_create, cpu_state_destroy, kr_cpu_prepare, kr_cpu_refine, kr_cpu_composite,
};
