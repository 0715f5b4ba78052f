/**
 * Connections: lists a client pages through with `first` and `after`, in the
 * shape Relay's connection specification gives them (edges with a cursor,
 * `pageInfo`), with the nodes directly as well and a total count. Paging
 * goes forward; `hasPreviousPage` says whether the list has rows up to the
 * `after` cursor.
 */
import { type ClassType, Extensions, Field, Int, ObjectType } from 'type-graphql';
import type { KeysetPage } from '../db/keyset';
import { CONNECTION_ROWS } from './query-limits';

@ObjectType({ simpleResolvers: true, description: 'Where a page lies in its list.' })
export class PageInfo {
  @Field({ description: 'Whether rows follow this page: ask again with `after: endCursor`.' }) hasNextPage!: boolean;
  /** Read only when asked (one query). */
  @Field(() => Boolean, { description: 'Whether the list has rows at or before the `after` cursor (false without one).' }) hasPreviousPage!: () => Promise<boolean>;
  @Field(() => String, { nullable: true, description: 'The cursor of the first row of this page; null when it is empty.' }) startCursor!: string | null;
  @Field(() => String, { nullable: true, description: 'The cursor of the last row of this page; null when it is empty.' }) endCursor!: string | null;
}

export interface Edge<T> {
  /** Encoded when a client selects it (graphql-js calls it). */
  cursor: () => string;
  node: T;
}

/**
 * The view of one page. `totalCount`, `pageInfo.hasPreviousPage` and each
 * edge's `cursor` are functions: graphql-js's default resolver calls them, so
 * their queries (and the encoding) run only when a client selects them.
 */
export interface ConnectionView<T> {
  edges: Edge<T>[];
  nodes: T[];
  pageInfo: PageInfo;
  totalCount: () => Promise<number>;
}

/** The connection and edge types of a node type: `<Node>Connection`, `<Node>Edge`. */
export function connectionTypes<T extends object>(node: ClassType<T>, nodeName: string, description: string) {
  @ObjectType(`${nodeName}Edge`, { simpleResolvers: true })
  class EdgeType {
    @Field(() => String, { description: 'Opaque; pass it as `after` to read the rows after this one.' }) cursor!: () => string;
    @Field(() => node) node!: T;
  }

  @ObjectType(`${nodeName}Connection`, { simpleResolvers: true, description })
  class ConnectionType {
    @Extensions(CONNECTION_ROWS)
    @Field(() => [EdgeType]) edges!: Edge<T>[];
    @Extensions(CONNECTION_ROWS)
    @Field(() => [node], { description: 'The nodes of `edges`, without cursors.' }) nodes!: T[];
    @Field(() => PageInfo) pageInfo!: PageInfo;
    @Field(() => Int, { description: 'Rows of the whole list with these filters, whatever the page (counted in SQL when asked).' }) totalCount!: () => Promise<number>;
  }

  return { ConnectionType, EdgeType };
}

/** The view of a keyset page, each row mapped by `view`. */
export function toConnection<Row, T>(page: KeysetPage<Row>, view: (row: Row) => T): ConnectionView<T> {
  const edges = page.rows.map(({ row, cursor }) => ({ cursor, node: view(row) }));
  return {
    edges,
    nodes: edges.map((edge) => edge.node),
    pageInfo: {
      hasNextPage: page.hasNextPage,
      hasPreviousPage: page.hasPreviousPage,
      startCursor: edges[0]?.cursor() ?? null,
      endCursor: edges[edges.length - 1]?.cursor() ?? null,
    },
    totalCount: page.totalCount,
  };
}
