import { GraphQLDateTime, GraphQLJSON } from 'graphql-scalars';

export const JSONScalar = GraphQLJSON;
export const DateTimeScalar = GraphQLDateTime;
