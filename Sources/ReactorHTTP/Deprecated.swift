import ReactorHosting

// Spellings of earlier releases, kept for one minor version so that a package written against
// them still compiles, with a warning that names the new home.

/// The registry of reactor types, now in `ReactorHosting` (a service's executable imports
/// `ReactorServerKit`, which has it).
@available(*, deprecated, message: "ReactorRegistry moved to ReactorHosting: import ReactorHosting, or ReactorServerKit in a service")
public typealias ReactorRegistry = ReactorHosting.ReactorRegistry
