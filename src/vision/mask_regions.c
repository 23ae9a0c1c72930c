/* Connected regions of a probability mask (mask_regions.h). */
#include "vision/mask_regions.h"

#include <string.h>

long kr_mask_keep_regions(float *m, int w, int h, long min_cells, uint8_t *seen, int32_t *list)
{
    size_t cells = (size_t)w * (size_t)h;
    memset(seen, 0, cells);
    long kept = 0;
    for (size_t start = 0; start < cells; start++) {
        if (seen[start])
            continue;
        if (!(m[start] >= 0.5f)) {
            m[start] = 0.0f;
            continue;
        }
        /* breadth first: list[0, n) is the region, list[head] the next cell to expand */
        size_t n = 0, head = 0;
        seen[start] = 1;
        list[n++] = (int32_t)start;
        while (head < n) {
            int32_t c = list[head++];
            int x = c % w, y = c / w;
            int32_t nb[4] = {x > 0 ? c - 1 : -1, x + 1 < w ? c + 1 : -1, y > 0 ? c - w : -1,
                             y + 1 < h ? c + w : -1};
            for (int k = 0; k < 4; k++) {
                int32_t q = nb[k];
                if (q < 0 || seen[q] || !(m[q] >= 0.5f))
                    continue;
                seen[q] = 1;
                list[n++] = q;
            }
        }
        if ((long)n < min_cells)
            for (size_t i = 0; i < n; i++)
                m[list[i]] = 0.0f;
        else
            kept += (long)n;
    }
    return kept;
}
