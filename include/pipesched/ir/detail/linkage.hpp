#pragma once

// Where the heavy entry points are compiled (README, "Compiled or header-only").
//
// By default they are compiled once, in the library (the CMake target pipesched::pipesched,
// built from src/): their headers declare them and leave out the code only they need, so a file
// that calls plan() or validate() compiles that code zero times instead of once. Defining
// PIPESCHED_HEADER_ONLY (CMake: -DPIPESCHED_HEADER_ONLY=ON) makes the same headers define them
// inline, with nothing to link, as in fmt's FMT_HEADER_ONLY. Define it in every translation
// unit of a program or in none.
//
// Each entry point's definition stays in its header, after `PIPESCHED_INLINE` and under
// `#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_<UNIT>)`, and so do the
// includes only it needs; the library's source (src/pipesched.cpp) defines every
// PIPESCHED_DEFINE_<UNIT> before any include and includes the headers, so each definition is
// compiled once.
#ifdef PIPESCHED_HEADER_ONLY
#define PIPESCHED_INLINE inline
#else
#define PIPESCHED_INLINE
#endif
