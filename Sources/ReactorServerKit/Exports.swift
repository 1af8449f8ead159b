// What a service's executable needs, in one import: the reactor API, the registry and creation
// parameters, ArgumentParser for the app's own options, and what an app's own authenticator
// implements (owners).
@_exported import ArgumentParser
@_exported import Logging
@_exported import ReactorCore
@_exported import ReactorHosting
@_exported import struct ReactorHTTP.AuthenticationFailure
@_exported import struct ReactorHTTP.AuthenticationRequest
@_exported import protocol ReactorHTTP.Authenticator
