/** Tool registration and the built-in tools. */
export * from './builtin-tools';
export * from './calculator';
export * from './snippet-tools';
export * from './tool-registry';
