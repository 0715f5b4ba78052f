/**
 * How deep a JSON input value (snippet metadata, configuration options, any
 * `JSON` argument) may nest: in the variables, in document literals and in a
 * JSON text sent as a string alike. No stored format needs more, and much
 * deeper values would exhaust the call stack of whatever walks or serialises
 * them (a 100,000-deep array is 200 kB of JSON).
 */
export const MAX_INPUT_DEPTH = 64;
