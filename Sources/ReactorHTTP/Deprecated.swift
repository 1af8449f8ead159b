import ReactorHosting

// Spellings of earlier releases, kept for one minor version so that a package written against
// them still compiles, with a warning that names the new home.

/// The registry of reactor types, now in `ReactorHosting` (a service's executable imports
/// `ReactorServerKit`, which has it). A file that imports `ReactorHTTP` and `ReactorHosting`
/// both sees this alias, which shadows the type it names: there, write
/// `ReactorHosting.ReactorRegistry` until the alias is gone.
@available(
    *, deprecated,
    message:
        "ReactorRegistry moved to ReactorHosting: import ReactorHosting (where ReactorHTTP is imported too, write ReactorHosting.ReactorRegistry), or ReactorServerKit in a service"
)
public typealias ReactorRegistry = ReactorHosting.ReactorRegistry
