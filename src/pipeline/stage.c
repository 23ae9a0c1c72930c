/* The stages' context: warnings. */
#include "pipeline/stage.h"

#include <stdarg.h>

void kr_stage_warn(const kr_stage_ctx *ctx, const char *fmt, ...)
{
    atomic_fetch_add(ctx->warnings, 1);
    va_list ap;
    va_start(ap, fmt);
    keyer_logv(ctx->logger, KEYER_LOG_WARNING, fmt, ap);
    va_end(ap);
}
