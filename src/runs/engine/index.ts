/** The agent loop and its pure rules; see each module for the behaviour it owns. */
export * from './agent-loop';
export * from './loop-contract';
export * from './provider-call';
export * from './tool-dispatch';
export * from './context-window';
export * from './run-step';
export * from '../../prompt/skill-block';
export * from './tool-result';
export * from './run-machine';
