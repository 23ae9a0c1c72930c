/* Live network inputs (io_internal.h, kr_live): reconnection with back-off, and the frames'
 * timestamps continued over the gap. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "io/io_internal.h"
#include "keyer/log.h"

/* Reconnection back-off: the first wait and the longest (nanoseconds). */
#define BACKOFF_FIRST_NS 250000000LL
#define BACKOFF_MAX_NS 4000000000LL

int64_t kr_live_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int kr_live_url(const char *url, const AVFormatContext *fc)
{
    static const char *const live[] = {"rtsp", "rtsps", "rtmp", "rtmps", "rtmpt", "rtmpts",
                                       "rtmpe", "rtmpte", "srt", "udp", "rtp", "tcp"};
    if (kr_source_is_sdp(url))
        return 1;
    const char *sep = strstr(url, "://");
    if (!sep)
        return 0;
    size_t n = (size_t)(sep - url);
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
        if (strlen(live[i]) == n && !strncasecmp(url, live[i], n))
            return 1;
    int http = (n == 4 && !strncasecmp(url, "http", 4)) || (n == 5 && !strncasecmp(url, "https", 5));
    return http && (fc->duration == AV_NOPTS_VALUE || fc->duration <= 0);
}

void kr_live_init(kr_live *l, const kr_source *s, int on, double reconnect_max)
{
    memset(l, 0, sizeof(*l));
    l->on = on;
    l->reconnect_max = reconnect_max;
    l->tb = l->src_tb = s->fc->streams[s->stream]->time_base;
    l->layout_n = s->fc->nb_streams;
    for (unsigned i = 0; i < s->fc->nb_streams && i < KR_LIVE_LAYOUT_MAX; i++)
        l->layout[i] = s->fc->streams[i]->codecpar->codec_id;
    if (on)
        l->last_frame_ns = kr_live_now_ns();
}

void kr_live_frame_returned(kr_live *l)
{
    if (l->on)
        l->last_frame_ns = kr_live_now_ns();
}

int kr_live_is_break(const kr_live *l, keyer_status st, const atomic_int *interrupt)
{
    return l->on && !(interrupt && atomic_load(interrupt)) &&
           (st == KEYER_STATUS_END || st == KEYER_STATUS_IO || st == KEYER_STATUS_BAD_DATA);
}

int kr_live_same_layout(const kr_live *l, const AVFormatContext *fc)
{
    if (fc->nb_streams != l->layout_n || l->layout_n > KR_LIVE_LAYOUT_MAX)
        return 0;
    for (unsigned i = 0; i < fc->nb_streams; i++)
        if (fc->streams[i]->codecpar->codec_id != l->layout[i])
            return 0;
    return 1;
}

/* @p message without the "URL: " the source's messages start with. */
static const char *without_url(const char *url, const char *message)
{
    size_t n = strlen(url);
    if (!strncmp(message, url, n) && message[n] == ':' && message[n + 1] == ' ')
        return message + n + 2;
    return message;
}

/* Sleeps @p ns unless @p interrupt is set. */
static void backoff_sleep(const atomic_int *interrupt, int64_t ns)
{
    int64_t until = kr_live_now_ns() + ns;
    while (!(interrupt && atomic_load(interrupt))) {
        int64_t left = until - kr_live_now_ns();
        if (left <= 0)
            return;
        struct timespec ts = {0, left > 50000000 ? 50000000 : (long)left};
        nanosleep(&ts, NULL);
    }
}

keyer_status kr_live_reopen(kr_live *l, kr_source *s, const kr_source_opts *o, keyer_status cause,
                            keyer_error *err)
{
    char why[KEYER_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof(why), "%s", cause == KEYER_STATUS_END ? "the stream ended"
                                     : err && err->message[0] ? without_url(o->url, err->message)
                                                              : keyer_status_name(cause));
    if (!l->resync) /* a new break (not one before the first frame of a new connection) */
        l->gap_start_ns = l->last_frame_ns ? l->last_frame_ns : kr_live_now_ns();
    int64_t give_up = l->gap_start_ns + (int64_t)(l->reconnect_max * 1e9);
    keyer_log(o->logger, KEYER_LOG_WARNING, "%s: input lost (%s): reconnecting for up to %.0f s",
              o->url, why, l->reconnect_max);
    kr_source_close(s);
    l->resync = 1; /* until a frame arrives, nothing of a new connection is kept */
    int64_t delay = BACKOFF_FIRST_NS;
    int attempts = 0, opened = 0;
    keyer_error last = {0};
    while (kr_live_now_ns() < give_up) {
        if (o->interrupt && atomic_load(o->interrupt))
            break;
        attempts++;
        memset(&last, 0, sizeof(last));
        keyer_status st = kr_source_open(s, o, &last);
        if (st == KEYER_OK) {
            opened = 1;
            break;
        }
        if (st == KEYER_STATUS_INTERRUPTED || st == KEYER_STATUS_OUT_OF_MEMORY) {
            l->on = 0;
            if (err)
                *err = last;
            return st;
        }
        keyer_log(o->logger, KEYER_LOG_DEBUG, "%s: reconnection attempt %d: %s", o->url,
                  attempts, last.message);
        if (kr_live_now_ns() + delay >= give_up)
            break;
        backoff_sleep(o->interrupt, delay);
        delay = delay * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : delay * 2;
    }
    if (!opened) {
        l->on = 0;
        if (o->interrupt && atomic_load(o->interrupt))
            return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "%s: reading was interrupted",
                                   o->url);
        return keyer_error_set(err, KEYER_STATUS_IO,
                               "%s: the input broke off (%s) and did not come back within %.0f "
                               "s (%d attempt%s%s%s)", o->url, why, l->reconnect_max, attempts,
                               attempts == 1 ? "" : "s", last.message[0] ? "; last: " : "",
                               without_url(o->url, last.message));
    }
    l->src_tb = s->fc->streams[s->stream]->time_base;
    keyer_log(o->logger, KEYER_LOG_INFO, "%s: reconnected (attempt %d)", o->url, attempts);
    return KEYER_OK;
}

static int64_t map_ts(const kr_live *l, int64_t t)
{
    return t == AV_NOPTS_VALUE ? t : av_rescale_q(t, l->src_tb, l->tb) + l->ts_offset;
}

int kr_live_map(kr_live *l, AVFrame *pic, int64_t last_pts, int64_t last_duration,
                AVRational frame_rate, int64_t *missed, double *gap)
{
    int resynced = 0;
    if (l->resync) {
        /* the first frame after the gap follows the last frame returned by the gap's
         * wall-clock length in whole frames; the frames that length held were missed */
        double seconds = (double)(kr_live_now_ns() - l->gap_start_ns) / 1e9;
        AVRational fr = frame_rate.num > 0 && frame_rate.den > 0 ? frame_rate : (AVRational){25, 1};
        int64_t dur = last_duration > 0 ? last_duration : av_rescale_q(1, av_inv_q(fr), l->tb);
        if (dur <= 0)
            dur = 1;
        int64_t steps = llround(seconds * fr.num / fr.den);
        if (steps < 1)
            steps = 1;
        int64_t t = pic->best_effort_timestamp != AV_NOPTS_VALUE ? pic->best_effort_timestamp
                                                                 : pic->pts;
        int64_t target = (last_pts == INT64_MIN ? 0 : last_pts) + steps * dur;
        l->ts_offset = t == AV_NOPTS_VALUE ? 0 : target - av_rescale_q(t, l->src_tb, l->tb);
        l->keep_offset = av_rescale_q(l->ts_offset, l->tb, AV_TIME_BASE_Q);
        l->resync = 0;
        l->remapped = 1;
        *missed = steps - 1;
        *gap = seconds;
        resynced = 1;
    }
    if (l->remapped) {
        pic->pts = map_ts(l, pic->pts);
        pic->best_effort_timestamp = map_ts(l, pic->best_effort_timestamp);
        if (pic->pkt_duration > 0)
            pic->pkt_duration = av_rescale_q(pic->pkt_duration, l->src_tb, l->tb);
    }
    return resynced;
}

int kr_live_shift_packet(const kr_live *l, AVPacket *pkt, AVRational tb)
{
    if (l->resync)
        return 0;
    if (l->keep_offset) {
        int64_t d = av_rescale_q(l->keep_offset, AV_TIME_BASE_Q, tb);
        if (pkt->pts != AV_NOPTS_VALUE)
            pkt->pts += d;
        if (pkt->dts != AV_NOPTS_VALUE)
            pkt->dts += d;
    }
    return 1;
}
