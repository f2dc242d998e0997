#pragma once

/// @file
/// The export and namespace macros that every public header uses.

/// Marks a declaration as part of the library's exported ABI. The library is
/// built with hidden visibility, so everything public carries this.
#if defined(_WIN32)
#if defined(TENSORDICT_BUILDING_LIBRARY) && defined(TENSORDICT_SHARED)
#define TENSORDICT_API __declspec(dllexport)
#elif defined(TENSORDICT_SHARED)
#define TENSORDICT_API __declspec(dllimport)
#else
#define TENSORDICT_API
#endif
#else
#define TENSORDICT_API __attribute__((visibility("default")))
#endif

/// Opens the library namespace; a macro so an inline ABI namespace can be
/// added later without touching every file.
#define TENSORDICT_BEGIN_NAMESPACE namespace tensordict {
/// Closes the namespace that TENSORDICT_BEGIN_NAMESPACE opens.
#define TENSORDICT_END_NAMESPACE }
