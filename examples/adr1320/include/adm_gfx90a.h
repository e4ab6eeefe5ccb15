#pragma once
// gfx90a (MI200) tuning of the ADM kernel, included only by the gfx90a compile of adm.hip. It is not in
// hip_kernel_shared_headers: hipcc's spec 003 depfile lists the headers of the LAST target it compiles
// only (gfx940 here), so ninja never learns of this one (see meson.build).
constexpr float kAdmGfx90aGain = 1.0f;
