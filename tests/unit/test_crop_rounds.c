/*
 * The rounds of the cropping model stages (src/pipeline/crop_rounds.h: the face mesh and the
 * pose stage share them), without a model: recording ops stand for the owner.
 *  - a batch runs in rounds of at most one frame per stream, each stream's frames in order,
 *    failed and lost items left out, every item cleared, each stream's state asked for;
 *  - a round whose steps fail resets its states and fails its items (the session hears of
 *    each); the next round runs;
 *  - each round's items go on to the next stage when the round ends, each stream's in order;
 *    a frame the steps finish early (kr_rounds_finish) goes on at once and is neither reset
 *    nor failed with the rest of its round; run by the model stage's thread, every item goes
 *    on exactly once and the stage's handed_on op follows each batch's last item;
 *  - a pass's crops: the CUDA items' first; with CUDA runtimes one padded run of the
 *    smallest power of two holding them (the stage's batch caps it) and one wait of the host
 *    per pass, or when the owner's output places are full; host crops (and CUDA crops with
 *    CPU runtimes) in runs of the largest power of two not above what is left, no wait; an
 *    error stops the pass; the counters (runs, crops, padding, waits) as expected.
 * The device is a table whose stream is a counter (no GPU needed); the GPU side (real runs,
 * page-locked outputs, a GPU failure) is test_pipeline_pose_gpu and test_pipeline_mesh_gpu.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/crop_rounds.h"

/* ---- a device whose stream counts the host's waits ---------------------------------------- */

static int waits, fail_wait;
static int stream_token;

static keyer_status fake_stream_create(int ordinal, void **stream, keyer_error *err)
{
    (void)ordinal, (void)err;
    *stream = &stream_token;
    return KEYER_OK;
}

static void fake_stream_destroy(int ordinal, void *stream)
{
    (void)ordinal, (void)stream;
}

static keyer_status fake_stream_sync(int ordinal, void *stream, keyer_error *err)
{
    (void)ordinal;
    assert_ptr_equal(stream, &stream_token);
    waits++;
    if (fail_wait)
        return keyer_error_set(err, KEYER_STATUS_DEVICE, "fake device: the stream failed");
    return KEYER_OK;
}

static const kr_device_fns fake_dev = {
    .name = "fake",
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_sync = fake_stream_sync,
};

/* ---- the session's side: reports counted ----------------------------------------------------- */

static int errors_reported;
static atomic_int warnings, gpu_failed, cancel;

static void report(void *opaque, kr_report what, int stream, keyer_status status,
                   const keyer_error *err)
{
    (void)opaque, (void)stream, (void)status, (void)err;
    if (what == KR_REPORT_ERROR)
        errors_reported++;
}

static const kr_stage_ctx ctx = {NULL, NULL, &warnings, &gpu_failed, &cancel, report, NULL};

static int forward(void *opaque, kr_item *it);
static const kr_model_stage_ops stage_ops = {NULL, NULL, NULL, forward, NULL, NULL};

/* A model stage without a model, on the fake device when @p cuda, CUDA runtimes @p models_cuda;
 * the items it hands on are recorded (forward). */
/* A model stage with @p ops (and @p stats, may be NULL), on the fake CUDA device when @p cuda,
 * opened with @p run. */
static kr_model_stage *open_stage(const kr_model_stage_ops *ops, kr_stage_stats *stats, int cuda,
                                  kr_model_stage_run run)
{
    kr_model_stage_params mp = {
        .name = "test",
        .model_name = "none",
        .what = "",
        .input = {.slot = -1, .width = 1, .height = 1, .scale = 1.0f, .what = ""},
        .ctx = &ctx,
        .stats = stats,
        .fail_cuda_at = -1,
        .cuda_precision = KEYER_PRECISION_F32,
        .ops = ops,
    };
    keyer_model *model = NULL;
    kr_model_stage *ms = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_model_stage_create(&mp, &model, &ms, &err), KEYER_OK);
    if (cuda)
        assert_int_equal(kr_model_stage_use_cuda(ms, &fake_dev, 0, &err), KEYER_OK);
    assert_int_equal(kr_model_stage_open(ms, &run, &err), KEYER_OK);
    return ms;
}

static kr_model_stage *make_stage(int batch, int cuda, int models_cuda)
{
    return open_stage(&stage_ops, NULL, cuda, (kr_model_stage_run){batch, 0, 4, 0, models_cuda});
}

/* ---- the owner's side: what happened, recorded ---------------------------------------------- */

enum { MAX_CALLS = 64, MAX_ROUNDS = 16, MAX_ITEMS = 16 };

typedef struct call {
    int take;         /* 0: chunk, 1: take */
    int n, lg, cuda, deferred, at;
    int ord[64];
    int waits_before; /* the host's waits so far */
} call;

typedef struct owner {
    call calls[MAX_CALLS];
    int ncalls;
    int fail_chunk;   /* the chunk of this index fails (-1: none) */
    int chunks;
    /* rounds */
    int rounds;
    int round_n[MAX_ROUNDS];
    kr_item *round_items[MAX_ROUNDS][MAX_ITEMS];
    int fail_round;   /* the round of this index fails (-1: none) */
    int state_of[MAX_ITEMS]; /* one state per stream id: its address is the state */
    int resets[MAX_ITEMS];
    int cleared;
    /* items handed on, in order, with the rounds begun then and whether inside the steps */
    kr_rounds *r;
    int in_steps;
    int handed;
    kr_item *handed_items[MAX_ITEMS];
    int handed_rounds[MAX_ITEMS];
    int handed_in_steps[MAX_ITEMS];
    int finish_round, finish_pos; /* the steps finish this position of this round early */
} owner;

static keyer_status chunk(void *opaque, const int *ord, int n, int lg, int cuda, int deferred,
                          int at, keyer_error *err)
{
    owner *o = opaque;
    assert_true(o->ncalls < MAX_CALLS);
    call *c = &o->calls[o->ncalls++];
    *c = (call){0, n, lg, cuda, deferred, at, {0}, waits};
    memcpy(c->ord, ord, (size_t)n * sizeof(int));
    if (o->chunks++ == o->fail_chunk)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "chunk %d fails", o->fail_chunk);
    return KEYER_OK;
}

static keyer_status take(void *opaque, const int *ord, int n, keyer_error *err)
{
    (void)err;
    owner *o = opaque;
    assert_true(o->ncalls < MAX_CALLS);
    call *c = &o->calls[o->ncalls++];
    *c = (call){1, n, 0, 0, 0, 0, {0}, waits};
    memcpy(c->ord, ord, (size_t)n * sizeof(int));
    return KEYER_OK;
}

static const kr_crops_ops crops_ops = {chunk, take};

static owner the_owner;

static void clear_item(kr_item *it)
{
    it->n_dets = -7; /* a mark: cleared */
    the_owner.cleared++;
}

static keyer_status state(void *opaque, int id, void **out, keyer_error *err)
{
    owner *o = opaque;
    if (id < 0 || id >= MAX_ITEMS)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "no stream %d", id);
    *out = &o->state_of[id];
    return KEYER_OK;
}

static keyer_status steps(void *opaque, kr_model_stage *ms, kr_item *const *round,
                          void *const *states, int k, keyer_error *err)
{
    owner *o = opaque;
    assert_true(o->rounds < MAX_ROUNDS);
    int r = o->rounds++;
    o->round_n[r] = k;
    for (int j = 0; j < k; j++) {
        o->round_items[r][j] = round[j];
        /* the state is the stream's, NULL for items not run */
        if (round[j]->failed || round[j]->lost)
            assert_null(states[j]);
        else
            assert_ptr_equal(states[j], &o->state_of[round[j]->stream]);
    }
    if (r == o->finish_round) {
        o->in_steps = 1;
        kr_rounds_finish(o->r, ms, o->finish_pos);
        o->in_steps = 0;
        assert_null(states[o->finish_pos]); /* no longer the round's */
    }
    if (r == o->fail_round)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "round %d fails", r);
    return KEYER_OK;
}

static int forward(void *opaque, kr_item *it)
{
    (void)opaque;
    owner *o = &the_owner;
    assert_true(o->handed < MAX_ITEMS);
    o->handed_items[o->handed] = it;
    o->handed_rounds[o->handed] = o->rounds;
    o->handed_in_steps[o->handed] = o->in_steps;
    o->handed++;
    return 0;
}

static void reset(void *st)
{
    if (st)
        the_owner.resets[(int *)st - the_owner.state_of]++;
}

static const kr_rounds_ops rounds_ops = {"test", clear_item, state, steps, reset};

static void owner_reset(owner *o)
{
    memset(o, 0, sizeof(*o));
    o->fail_chunk = o->fail_round = o->finish_round = o->finish_pos = -1;
    waits = fail_wait = 0;
    errors_reported = 0;
}

/* A case's set-up: the owner reset, a stage of @p batch (make_stage's @p cuda, @p models_cuda)
 * into *@p ms and rounds of that batch with @p crop_cap crops per pass and @p out_cap output
 * places, which must be made. */
static kr_rounds *case_start(kr_model_stage **ms, int batch, int cuda, int models_cuda,
                             int crop_cap, int out_cap)
{
    owner_reset(&the_owner);
    *ms = make_stage(batch, cuda, models_cuda);
    kr_rounds *r = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_rounds_create(&rounds_ops, &the_owner, batch, crop_cap, out_cap, &r,
                                      &err),
                     KEYER_OK);
    the_owner.r = r;
    return r;
}

/* A case's end: its rounds and stage freed. */
static void case_end(kr_rounds **r, kr_model_stage **ms)
{
    kr_rounds_destroy(r);
    kr_model_stage_destroy(ms);
}

/* ---- passes ----------------------------------------------------------------------------------- */

static void expect_chunk(const call *c, int n, int lg, int cuda, int deferred, int at,
                         const int *ord)
{
    assert_int_equal(c->take, 0);
    assert_int_equal(c->n, n);
    assert_int_equal(c->lg, lg);
    assert_int_equal(c->cuda, cuda);
    assert_int_equal(c->deferred, deferred);
    if (deferred)
        assert_int_equal(c->at, at);
    for (int i = 0; i < n; i++)
        assert_int_equal(c->ord[i], ord[i]);
}

static void expect_take(const call *c, int n, int waits_before, const int *ord)
{
    assert_int_equal(c->take, 1);
    assert_int_equal(c->n, n);
    assert_int_equal(c->waits_before, waits_before);
    for (int i = 0; i < n; i++)
        assert_int_equal(c->ord[i], ord[i]);
}

static void test_pass_cuda_padded_then_host(void **state)
{
    (void)state;
    owner *o = &the_owner;
    kr_model_stage *ms = NULL;
    kr_rounds *r = case_start(&ms, 8, 1, 1, 64, 8);
    keyer_error err = {0};
    /* crops 0, 2, 3, 5, 6 of CUDA items, 1 and 4 of host items */
    const int cuda[7] = {1, 0, 1, 1, 0, 1, 1};
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 7, &crops_ops, o, &err), KEYER_OK);
    const int dev_ord[5] = {0, 2, 3, 5, 6}, host_ord[2] = {1, 4};
    assert_int_equal(o->ncalls, 3);
    expect_chunk(&o->calls[0], 5, 3, 1, 1, 0, dev_ord); /* one run of 8: 3 crops of padding */
    expect_take(&o->calls[1], 5, 1, dev_ord);            /* after one wait */
    expect_chunk(&o->calls[2], 2, 1, 0, 0, 0, host_ord); /* exactly 2 on the host */
    assert_int_equal(waits, 1);
    keyer_rounds_report rep;
    memset(&rep, 0, sizeof(rep));
    kr_rounds_report_add(r, &rep);
    assert_int_equal(rep.passes, 1);
    assert_int_equal(rep.runs, 2);
    assert_int_equal(rep.crops, 7);
    assert_int_equal(rep.padded, 3);
    assert_int_equal(rep.syncs, 1);
    for (int i = 0; i < 7; i++) /* one run of batch 8, one of batch 2 */
        assert_int_equal(rep.runs_by_batch[i], i == 3 || i == 1);
    /* an empty pass does nothing */
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 0, &crops_ops, o, &err), KEYER_OK);
    assert_int_equal(o->ncalls, 3);
    /* more crops than the owner has places for: refused */
    int many[65] = {0};
    assert_int_equal(kr_rounds_crops(r, ms, many, 65, &crops_ops, o, &err),
                     KEYER_STATUS_INTERNAL);
    kr_rounds_destroy(&r);
    assert_null(r);
    case_end(&r, &ms); /* NULL rounds accepted */
}

static void test_pass_output_places_full(void **state)
{
    (void)state;
    owner *o = &the_owner;
    kr_model_stage *ms = NULL;
    /* batch 8, 8 output places: 20 CUDA crops run 8, 8 and 4 with a wait after each */
    kr_rounds *r = case_start(&ms, 8, 1, 1, 64, 8);
    keyer_error err = {0};
    int cuda[20], ord[20];
    for (int i = 0; i < 20; i++)
        cuda[i] = 1, ord[i] = i;
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 20, &crops_ops, o, &err), KEYER_OK);
    assert_int_equal(o->ncalls, 6);
    expect_chunk(&o->calls[0], 8, 3, 1, 1, 0, ord);
    expect_take(&o->calls[1], 8, 1, ord);
    expect_chunk(&o->calls[2], 8, 3, 1, 1, 0, ord + 8);
    expect_take(&o->calls[3], 8, 2, ord + 8);
    expect_chunk(&o->calls[4], 4, 2, 1, 1, 0, ord + 16);
    expect_take(&o->calls[5], 4, 3, ord + 16);
    case_end(&r, &ms);
    /* 16 places: the first two runs share a wait */
    r = case_start(&ms, 8, 1, 1, 64, 16);
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 20, &crops_ops, o, &err), KEYER_OK);
    assert_int_equal(o->ncalls, 5);
    expect_chunk(&o->calls[0], 8, 3, 1, 1, 0, ord);
    expect_chunk(&o->calls[1], 8, 3, 1, 1, 8, ord + 8);
    expect_take(&o->calls[2], 16, 1, ord);
    expect_chunk(&o->calls[3], 4, 2, 1, 1, 0, ord + 16);
    expect_take(&o->calls[4], 4, 2, ord + 16);
    case_end(&r, &ms);
    /* batch 6: the largest runtime is 4 (powers of two), 7 crops run 4 and 4 (1 padding) */
    r = case_start(&ms, 6, 1, 1, 64, 6);
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 7, &crops_ops, o, &err), KEYER_OK);
    assert_int_equal(o->ncalls, 4);
    expect_chunk(&o->calls[0], 4, 2, 1, 1, 0, ord);
    expect_take(&o->calls[1], 4, 1, ord);
    expect_chunk(&o->calls[2], 3, 2, 1, 1, 0, ord + 4);
    expect_take(&o->calls[3], 3, 2, ord + 4);
    /* fewer places than the batch: refused */
    kr_rounds *bad = NULL;
    assert_int_equal(kr_rounds_create(&rounds_ops, o, 8, 64, 4, &bad, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(bad);
    case_end(&r, &ms);
}

static void test_pass_cpu_runtimes_and_errors(void **state)
{
    (void)state;
    owner *o = &the_owner;
    /* CUDA items, CPU runtimes (hybrid): exact powers of two, no wait of the host here */
    kr_model_stage *ms = NULL;
    kr_rounds *r = case_start(&ms, 8, 1, 0, 64, 8);
    keyer_error err = {0};
    const int cuda[7] = {1, 1, 1, 1, 1, 1, 1}, ord[7] = {0, 1, 2, 3, 4, 5, 6};
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 7, &crops_ops, o, &err), KEYER_OK);
    assert_int_equal(o->ncalls, 3);
    expect_chunk(&o->calls[0], 4, 2, 1, 0, 0, ord);
    expect_chunk(&o->calls[1], 2, 1, 1, 0, 0, ord + 4);
    expect_chunk(&o->calls[2], 1, 0, 1, 0, 0, ord + 6);
    assert_int_equal(waits, 0);
    case_end(&r, &ms);
    /* a failing chunk stops the pass with its error */
    r = case_start(&ms, 2, 0, 0, 64, 2);
    const int host[5] = {0};
    o->fail_chunk = 1;
    assert_int_equal(kr_rounds_crops(r, ms, host, 5, &crops_ops, o, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_int_equal(o->ncalls, 2);
    case_end(&r, &ms);
    /* a failing wait: the deferred crops take nothing, the error comes back */
    r = case_start(&ms, 4, 1, 1, 64, 4);
    fail_wait = 1;
    keyer_error_clear(&err);
    assert_int_equal(kr_rounds_crops(r, ms, cuda, 3, &crops_ops, o, &err),
                     KEYER_STATUS_DEVICE);
    assert_int_equal(o->ncalls, 1);
    assert_non_null(strstr(err.message, "the stream failed"));
    case_end(&r, &ms);
}

/* ---- rounds ----------------------------------------------------------------------------------- */

static void test_rounds_one_frame_per_stream(void **state)
{
    (void)state;
    owner *o = &the_owner;
    kr_model_stage *ms = NULL;
    kr_rounds *r = case_start(&ms, 8, 0, 0, 8, 8);
    keyer_error err = {0};
    kr_item_pool pool;
    memset(&pool, 0, sizeof(pool));
    pool.layout.ctx = &ctx;
    /* streams 0 1 0 2 1 0 3: item 6 (stream 3) failed already */
    const int streams[7] = {0, 1, 0, 2, 1, 0, 3};
    kr_item items[7];
    kr_item *batch[7];
    memset(items, 0, sizeof(items));
    int64_t seq[4] = {0};
    for (int i = 0; i < 7; i++) {
        items[i].pool = &pool;
        items[i].stream = streams[i];
        items[i].seq = seq[streams[i]]++;
        batch[i] = &items[i];
    }
    items[6].failed = 1;
    kr_rounds_run_batch(r, ms, batch, 7);
    for (int i = 0; i < 7; i++) /* all handed on by the rounds */
        assert_null(batch[i]);
    /* every item cleared, the failed one too */
    assert_int_equal(o->cleared, 7);
    for (int i = 0; i < 7; i++)
        assert_int_equal(items[i].n_dets, -7);
    /* rounds: {0, 1, 3}, {2, 4}, {5}: one frame per stream, in order */
    assert_int_equal(o->rounds, 3);
    const int expect[3][3] = {{0, 1, 3}, {2, 4, -1}, {5, -1, -1}};
    const int n[3] = {3, 2, 1};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(o->round_n[k], n[k]);
        for (int j = 0; j < n[k]; j++)
            assert_ptr_equal(o->round_items[k][j], &items[expect[k][j]]);
    }
    for (int i = 0; i < 6; i++)
        assert_int_equal(items[i].failed, 0);
    assert_int_equal(errors_reported, 0);
    /* the second round fails (not a device error): its states reset, its items failed and
     * reported; the third still runs */
    owner_reset(o);
    o->r = r;
    for (int i = 0; i < 7; i++) {
        items[i].failed = 0;
        batch[i] = &items[i];
    }
    o->fail_round = 1;
    kr_rounds_run_batch(r, ms, batch, 7);
    assert_int_equal(o->rounds, 3); /* stream 3's item is in the first round now */
    assert_int_equal(o->round_n[0], 4);
    assert_int_equal(o->round_n[1], 2);
    assert_true(items[2].failed && items[4].failed);
    for (int i = 0; i < 7; i++)
        if (i != 2 && i != 4)
            assert_int_equal(items[i].failed, 0);
    assert_int_equal(errors_reported, 2);
    assert_int_equal(o->resets[0], 1);
    assert_int_equal(o->resets[1], 1);
    assert_int_equal(o->resets[2], 0);
    keyer_rounds_report rep;
    memset(&rep, 0, sizeof(rep));
    kr_rounds_report_add(r, &rep);
    assert_int_equal(rep.batches, 2);
    assert_int_equal(rep.rounds, 6);
    /* a batch larger than the rounds' fails its items */
    owner_reset(o);
    for (int i = 0; i < 7; i++) {
        items[i].failed = 0;
        batch[i] = &items[i];
    }
    kr_rounds *small = NULL;
    assert_int_equal(kr_rounds_create(&rounds_ops, o, 4, 4, 4, &small, &err), KEYER_OK);
    kr_rounds_run_batch(small, ms, batch, 7);
    assert_int_equal(o->rounds, 0);
    assert_int_equal(errors_reported, 7);
    assert_int_equal(o->handed, 0); /* left to the model stage, which hands on at the end */
    for (int i = 0; i < 7; i++)
        assert_ptr_equal(batch[i], &items[i]);
    kr_rounds_destroy(&small);
    case_end(&r, &ms);
}

/* The items go on as their frames are over: each round's at its end (each stream's in order,
 * before the batch's next round), a frame finished early by the steps at once. */
static void test_rounds_hand_on(void **state)
{
    (void)state;
    owner *o = &the_owner;
    kr_model_stage *ms = NULL;
    kr_rounds *r = case_start(&ms, 8, 0, 0, 8, 8);
    kr_item_pool pool;
    memset(&pool, 0, sizeof(pool));
    pool.layout.ctx = &ctx;
    /* streams 0 1 0 2 1 0 3 3: item 6 (stream 3) failed already; rounds {0, 1, 3, 7},
     * {2, 4}, {5} */
    const int streams[8] = {0, 1, 0, 2, 1, 0, 3, 3};
    kr_item items[8];
    kr_item *batch[8];
    memset(items, 0, sizeof(items));
    int64_t seq[4] = {0};
    for (int i = 0; i < 8; i++) {
        items[i].pool = &pool;
        items[i].stream = streams[i];
        items[i].seq = seq[streams[i]]++;
        batch[i] = &items[i];
    }
    items[6].failed = 1;
    kr_rounds_run_batch(r, ms, batch, 8);
    assert_int_equal(o->rounds, 3);
    /* after round 1: 0, 1, 3, the failed 6, then 7 (stream 3 after 6); after round 2: 2, 4;
     * after round 3: 5 */
    const int order[8] = {0, 1, 3, 6, 7, 2, 4, 5}, when[8] = {1, 1, 1, 1, 1, 2, 2, 3};
    assert_int_equal(o->handed, 8);
    for (int h = 0; h < 8; h++) {
        assert_ptr_equal(o->handed_items[h], &items[order[h]]);
        assert_int_equal(o->handed_rounds[h], when[h]);
        assert_int_equal(o->handed_in_steps[h], 0);
    }
    for (int i = 0; i < 8; i++)
        assert_null(batch[i]);
    /* round 2's first position (item 2, stream 0) finished inside the steps: it goes on at
     * once; then the round fails: item 4 is failed and its stream reset, item 2 neither */
    owner_reset(o);
    o->r = r;
    for (int i = 0; i < 8; i++) {
        items[i].failed = i == 6;
        batch[i] = &items[i];
    }
    o->finish_round = 1;
    o->finish_pos = 0;
    o->fail_round = 1;
    kr_rounds_run_batch(r, ms, batch, 8);
    const int order2[8] = {0, 1, 3, 6, 7, 2, 4, 5}, when2[8] = {1, 1, 1, 1, 1, 2, 2, 3};
    assert_int_equal(o->handed, 8);
    for (int h = 0; h < 8; h++) {
        assert_ptr_equal(o->handed_items[h], &items[order2[h]]);
        assert_int_equal(o->handed_rounds[h], when2[h]);
        assert_int_equal(o->handed_in_steps[h], order2[h] == 2);
    }
    assert_int_equal(items[2].failed, 0);
    assert_int_equal(items[4].failed, 1);
    assert_int_equal(errors_reported, 1);
    assert_int_equal(o->resets[0], 0);
    assert_int_equal(o->resets[1], 1);
    /* a first-round frame finished early goes on before the rest of its round, and an item
     * not run that is behind it in its stream follows it at once */
    owner_reset(o);
    o->r = r;
    const int streams3[3] = {1, 0, 0};
    for (int i = 0; i < 3; i++) {
        memset(&items[i], 0, sizeof(items[i]));
        items[i].pool = &pool;
        items[i].stream = streams3[i];
        items[i].seq = i;
        batch[i] = &items[i];
    }
    items[2].lost = 1; /* behind item 1 in stream 0 */
    o->finish_round = 0;
    o->finish_pos = 1; /* item 1 */
    kr_rounds_run_batch(r, ms, batch, 3);
    assert_int_equal(o->rounds, 1);
    assert_int_equal(o->handed, 3);
    assert_ptr_equal(o->handed_items[0], &items[1]);
    assert_ptr_equal(o->handed_items[1], &items[2]);
    assert_ptr_equal(o->handed_items[2], &items[0]);
    assert_true(o->handed_in_steps[0] && o->handed_in_steps[1] && !o->handed_in_steps[2]);
    case_end(&r, &ms);
}

/* The model stage's thread with the rounds as its batch op: each item goes on once (the ones
 * the rounds handed on are not handed on again), handed_on after each batch's last item. */
static kr_rounds *thread_rounds;
static int batch_calls, handed_calls, handed_at[8];

static void thread_batch(void *opaque, kr_model_stage *ms, kr_item **items, int n)
{
    (void)opaque;
    batch_calls++;
    kr_rounds_run_batch(thread_rounds, ms, items, n);
}

static void thread_handed_on(void *opaque)
{
    (void)opaque;
    if (handed_calls < 8)
        handed_at[handed_calls] = the_owner.handed;
    handed_calls++;
}

static void test_stage_thread_hands_on_once(void **state)
{
    (void)state;
    owner *o = &the_owner;
    owner_reset(o);
    batch_calls = handed_calls = 0;
    static const kr_model_stage_ops ops = {NULL, NULL, NULL, forward, thread_batch,
                                           thread_handed_on};
    kr_stage_stats stats;
    assert_int_equal(kr_stage_stats_init(&stats, "test", 1), 0);
    kr_model_stage *ms = open_stage(&ops, &stats, 0, (kr_model_stage_run){4, 0, 16, 0, 0});
    keyer_error err = {0};
    assert_int_equal(kr_rounds_create(&rounds_ops, o, 4, 4, 4, &thread_rounds, &err), KEYER_OK);
    o->r = thread_rounds;
    kr_item_pool pool;
    memset(&pool, 0, sizeof(pool));
    pool.layout.ctx = &ctx;
    /* streams 0 1 0 2 | 1 0: batches of 4 and 2 (all queued, then the queue closed) */
    const int streams[6] = {0, 1, 0, 2, 1, 0};
    kr_item items[6];
    memset(items, 0, sizeof(items));
    int64_t seq[3] = {0};
    for (int i = 0; i < 6; i++) {
        items[i].pool = &pool;
        items[i].stream = streams[i];
        items[i].seq = seq[streams[i]]++;
        assert_int_equal(kr_queue_push(kr_model_stage_queue(ms), &items[i]), KEYER_OK);
    }
    kr_queue_close(kr_model_stage_queue(ms));
    assert_int_equal(kr_model_stage_start(ms, -1, &err), KEYER_OK);
    kr_model_stage_join(ms);
    assert_int_equal(batch_calls, 2);
    assert_int_equal(handed_calls, 2);
    assert_int_equal(handed_at[0], 4);
    assert_int_equal(handed_at[1], 6);
    /* rounds {0, 1, 3}, {2} and {4, 5}: each item once, each stream's in order */
    const int order[6] = {0, 1, 3, 2, 4, 5};
    assert_int_equal(o->handed, 6);
    for (int h = 0; h < 6; h++)
        assert_ptr_equal(o->handed_items[h], &items[order[h]]);
    kr_rounds_destroy(&thread_rounds);
    kr_model_stage_destroy(&ms);
    kr_stage_stats_fini(&stats);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_cuda_padded_then_host),
        cmocka_unit_test(test_pass_output_places_full),
        cmocka_unit_test(test_pass_cpu_runtimes_and_errors),
        cmocka_unit_test(test_rounds_one_frame_per_stream),
        cmocka_unit_test(test_rounds_hand_on),
        cmocka_unit_test(test_stage_thread_hands_on_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
