// What a service's executable needs, in one import: the reactor API, the registry and creation
// parameters, and ArgumentParser for the app's own options.
@_exported import ArgumentParser
@_exported import Logging
@_exported import ReactorCore
@_exported import ReactorHosting
