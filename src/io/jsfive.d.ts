/** The part of jsfive (a pure JavaScript HDF5 reader) that hdf5_datasets.ts uses. */
declare module 'jsfive' {
  export interface DataObjects {
    /** The object header's address in the file. */
    readonly offset: number;
    /** The object header's messages: `type` and `offset_to_message` (in the file). */
    readonly msgs: Array<Map<string, number>>;
    find_msg_type(type: number): Array<{get(key: 'offset_to_message'): number}>;
    _get_data_message_properties(offset: number): [number, number, number, number];
  }
  export class Group {
    constructor(name: string, dataobjects: DataObjects, parent?: Group);
    readonly name: string;
    readonly keys: string[];
    readonly attrs: Record<string, unknown>;
    /** Link name -> the object's address (a hard link) or the target path (a soft link). */
    readonly _links: Record<string, number | string>;
    readonly _dataobjects: DataObjects;
    get(path: string): Group | Dataset;
  }
  export class File extends Group {
    constructor(buffer: ArrayBuffer, filename?: string);
  }
  export class Dataset {
    readonly name: string;
    readonly shape: number[];
    readonly dtype: string | unknown[];
    readonly attrs: Record<string, unknown>;
    readonly _dataobjects: DataObjects;
  }
}
